package cloudmap

import (
	"context"
	"errors"
	"strconv"
	"strings"
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
// as they grow, given back as they shrink. One account may hold at most
// perAccount of it across all its scopes (its regions), so that no single
// made-up key fills it alone, in one region or in many; other is what the
// account of the scope being changed holds in its other scopes. code is
// the error code of the last check, for a store that learns only later
// (the Redis store, when it reserves the room in Redis) that there was
// none.
type budget struct {
	used, max, perAccount int64
	other                 int64
	code                  string
}

func (b *budget) check(size, n int64, code string) error {
	b.code = code
	switch {
	case b.other+size+n > b.perAccount:
		return b.accountFull(code)
	case b.used+n > b.max:
		return b.full(code)
	}
	return nil
}

// accountFull is the error when the account's own share is taken.
func (b *budget) accountFull(code string) error {
	if code == "" {
		code = codeResourceLimitExceeded
	}
	return &apiError{Code: code, Message: "this account's registry is full: an account not named in the gateway's access_keys holds at most " +
		strconv.FormatInt(b.perAccount>>10, 10) + " KiB here, in all its regions together"}
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
	mu       sync.RWMutex
	scopes   map[string]*state
	known    map[string]bool  // scopes of known accounts
	accounts map[string]int64 // what each unknown account holds of the budget, all its scopes together
	budget   budget
}

func newMemStore(lim Limits) *memStore {
	return &memStore{scopes: map[string]*state{}, known: map[string]bool{}, accounts: map[string]int64{},
		budget: budget{max: lim.UnknownBytes, perAccount: lim.UnknownAccountBytes}}
}

// accountOf is the account part of a scope's key (Scope.key).
func accountOf(scope string) string {
	a, _, _ := strings.Cut(scope, "/")
	return a
}

// addAccount counts n more bytes (fewer when negative) for account.
func (m *memStore) addAccount(account string, n int64) {
	if m.accounts[account] += n; m.accounts[account] <= 0 {
		delete(m.accounts, account)
	}
}

func (m *memStore) update(_ context.Context, scope string, known bool, fn func(*state) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.apply(scope, known, fn)
}

// apply is update with m.mu held.
func (m *memStore) apply(scope string, known bool, fn func(*state) error) error {
	acct := accountOf(scope)
	s, ok := m.scopes[scope]
	if known && !m.known[scope] {
		// An account becomes known (named in access_keys, or the
		// autoscaler's): what it holds leaves the shared budget.
		m.known[scope] = true
		if ok {
			m.budget.give(s.size)
			m.addAccount(acct, -s.size)
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
	before := int64(0) // what the scope held of its account's share
	if ok {
		before = s.size
	}
	if s.budget != nil {
		m.budget.other = m.accounts[acct] - before
	}
	seq := s.Seq
	err := fn(s)
	if !ok {
		if err == nil && s.Seq > seq {
			m.scopes[scope] = s
		} else {
			if s.budget != nil {
				m.budget.used -= s.size
			}
			return err
		}
	}
	if s.budget != nil {
		m.addAccount(acct, s.size-before)
	}
	return err
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
