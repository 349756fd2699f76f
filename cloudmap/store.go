package cloudmap

import (
	"context"
	"errors"
	"strconv"
	"sync"
)

// store keeps the state of every scope. update runs fn on a scope's state
// with every other update of that scope excluded, and keeps what fn changed
// only if it returns nil; fn must check before it changes anything, since
// the memory store does not roll back. known tells whether the scope's
// account is one the operator named (or the autoscaler's): those are bound
// by the per-account quotas alone, every other scope also by the shared
// budget for unknown accounts. view runs fn on a state it must not change;
// with stale, a store that cannot reach its data in time may answer from
// the last state it read.
type store interface {
	update(ctx context.Context, scope string, known bool, fn func(*state) error) error
	view(ctx context.Context, scope string, stale bool, fn func(*state) error) error
}

// errStoreConflict: a Redis update lost the race for its scope too often.
var errStoreConflict = errors.New("cloudmap: too many concurrent updates of one registry")

// budget is the memory that the scopes of unknown accounts share: taken
// as they grow, given back as they shrink. One scope may hold at most
// perScope of it, so that no single made-up key fills it alone. code is
// the error code of the last check, for a store that learns only later
// (the Redis store, when it reserves the room in Redis) that there was
// none.
type budget struct {
	used, max, perScope int64
	code                string
}

func (b *budget) check(size, n int64, code string) error {
	b.code = code
	switch {
	case size+n > b.perScope:
		return &apiError{Code: code, Message: "this account's registry is full: an account not named in the gateway's access_keys holds at most " +
			strconv.FormatInt(b.perScope>>10, 10) + " KiB here"}
	case b.used+n > b.max:
		return b.full(code)
	}
	return nil
}

// full is the error when the shared room is taken.
func (b *budget) full(code string) error {
	if code == "" {
		code = codeResourceLimitExceeded
	}
	return &apiError{Code: code, Message: "the registry's room for accounts not named in the gateway's access_keys (" +
		strconv.FormatInt(b.max>>20, 10) + " MiB) is full; named accounts are not affected"}
}

func (b *budget) take(size, n int64, code string) error {
	if err := b.check(size, n, code); err != nil {
		return err
	}
	b.used += n
	return nil
}

func (b *budget) give(n int64) { b.used -= n }

// memStore holds every scope in memory, under one lock.
type memStore struct {
	mu     sync.RWMutex
	scopes map[string]*state
	known  map[string]bool // scopes of known accounts
	budget budget
}

func newMemStore(lim Limits) *memStore {
	return &memStore{scopes: map[string]*state{}, known: map[string]bool{},
		budget: budget{max: lim.UnknownBytes, perScope: lim.UnknownScopeBytes}}
}

func (m *memStore) update(_ context.Context, scope string, known bool, fn func(*state) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.scopes[scope]
	if known && !m.known[scope] {
		// An account becomes known (named in access_keys, or the
		// autoscaler's): what it holds leaves the shared budget.
		m.known[scope] = true
		if ok {
			m.budget.give(s.size)
			s.budget = nil
		}
	}
	if !ok {
		s = newState()
		if !m.known[scope] {
			// The scope's own bytes are taken while fn runs and kept
			// only if it creates something.
			s.budget = &m.budget
			m.budget.used += s.size
		}
	}
	seq := s.Seq
	err := fn(s)
	if !ok {
		if err == nil && s.Seq > seq {
			m.scopes[scope] = s
		} else if s.budget != nil {
			m.budget.used -= s.size
		}
	}
	if err != nil {
		return err
	}
	return nil
}

func (m *memStore) view(_ context.Context, scope string, _ bool, fn func(*state) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.scopes[scope]
	if !ok {
		s = newState()
	}
	return fn(s)
}
