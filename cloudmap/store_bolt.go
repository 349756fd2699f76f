package cloudmap

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/state/bolt"
)

// Table is the table of the Cloud Map registry's records in the embedded
// store and in an export (state.Record.Table).
const Table = "cloudmap"

// boltStore is the memory store kept on disk: every scope is held in
// memory, as memStore holds it, and every change is written to the
// embedded store as the records the Redis store writes (eachRecord),
// under the key <scope> NUL <field>, beside <scope> NUL #seq (its Seq)
// and <scope> NUL #known (the account was a known one). An update returns
// only once its change is on disk; concurrent updates share a commit.
//
// A change is noted in its state (dirty) while the update runs; the
// commit that follows moves every scope's noted changes to unsaved and
// writes the records as they are then. unsaved is emptied only once a
// commit succeeded (bbolt's OnCommit), so that a commit rolled back and
// retried writes them again; within one transaction, each record is
// written once. Both run under the memory store's lock.
type boltStore struct {
	mem     *memStore
	db      *bolt.DB
	pending map[string]bool            // scopes with noted changes; guarded by mem.mu
	unsaved map[string]map[change]bool // taken into a commit not yet done; guarded by mem.mu
	// tx is the transaction that last wrote unsaved: the other writes of
	// its group write only what they take from pending. Guarded by mem.mu.
	tx bolt.Transaction
}

// Record keys of a scope besides its records (whose fields start with a
// kind and a colon).
const (
	boltSeqKey   = "#seq"
	boltKnownKey = "#known"
)

// newBoltStore loads every scope db holds and keeps them there from now
// on.
func newBoltStore(lim Limits, db *bolt.DB) (*boltStore, error) {
	b := &boltStore{mem: newMemStore(lim), db: db, pending: map[string]bool{}, unsaved: map[string]map[change]bool{}}
	if err := b.load(); err != nil {
		return nil, fmt.Errorf("cloudmap: loading the registry from %s: %w", db.Path(), err)
	}
	return b, nil
}

// load reads every scope, its services, namespaces, operations and tags
// first, then their revisions and instances, which need their service.
func (b *boltStore) load() error {
	m := b.mem
	return b.db.Read(func(r *bolt.Reader) error {
		for pass := range 2 {
			err := r.Each(Table, "", func(k, v []byte) error {
				scope, field, ok := strings.Cut(string(k), "\x00")
				if !ok {
					return fmt.Errorf("key %q: no scope", k)
				}
				s := m.scopes[scope]
				if s == nil {
					s = newState()
					m.scopes[scope] = s
				}
				late := strings.HasPrefix(field, kindInstance+":") || strings.HasPrefix(field, kindRevision+":")
				switch {
				case field == boltSeqKey:
					if pass == 0 {
						if _, err := fmt.Sscan(string(v), &s.Seq); err != nil {
							return fmt.Errorf("scope %s: seq %q: %w", scope, v, err)
						}
					}
				case field == boltKnownKey:
					m.known[scope] = true
				case late == (pass == 1):
					return applyRecord(s, field, string(v))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		for scope, s := range m.scopes {
			s.reindex()
			if !m.known[scope] {
				s.budget = &m.budget
				m.budget.used += s.size
				m.addAccount(accountOf(scope), s.size)
			}
		}
		return nil
	})
}

func (b *boltStore) view(ctx context.Context, scope string, stale bool, fn func(*state) error) error {
	return b.mem.view(ctx, scope, stale, fn)
}

func (b *boltStore) update(ctx context.Context, scope string, known bool, fn func(*state) error) error {
	changed := false
	err := b.mem.update(ctx, scope, known, func(s *state) error {
		if s.dirty == nil {
			s.dirty = map[change]bool{}
		}
		seq, n := s.Seq, len(s.dirty)
		defer func() {
			if s.Seq != seq || len(s.dirty) != n {
				changed = true
				b.pending[scope] = true
			}
		}()
		return fn(s)
	})
	if !changed {
		return err
	}
	if werr := b.db.Write(b.commit); werr != nil {
		return fmt.Errorf("cloudmap: %w", werr)
	}
	return err
}

// commit writes every change noted so far, as the states hold it now.
func (b *boltStore) commit(w *bolt.Writer) error {
	m := b.mem
	m.mu.Lock()
	defer m.mu.Unlock()
	// The first write of a transaction writes every unsaved record (a
	// group retried after a rollback must write them again); the others
	// only what they take.
	write := b.unsaved
	if b.tx == w.Transaction() {
		write = map[string]map[change]bool{}
	}
	b.tx = w.Transaction()
	for scope := range b.pending {
		delete(b.pending, scope)
		s := m.scopes[scope]
		if s == nil {
			continue // a new scope its update did not keep
		}
		for _, into := range []map[string]map[change]bool{b.unsaved, write} {
			u := into[scope]
			if u == nil {
				u = map[change]bool{}
				into[scope] = u
			}
			for ch := range s.dirty {
				u[ch] = true
			}
		}
		clear(s.dirty)
	}
	for scope, u := range write {
		s := m.scopes[scope]
		prefix := scope + "\x00"
		var err error
		s.eachRecord(u, func(ch change, f, v string) {
			if err != nil {
				return
			}
			if v == "" {
				err = w.Delete(Table, prefix+f)
			} else {
				err = w.Put(Table, prefix+f, []byte(v))
			}
			if err == nil && ch.kind == kindService && v == "" {
				err = w.DeletePrefix(Table, prefix+kindInstance+":"+ch.id+":")
			}
		})
		if err == nil {
			err = w.Put(Table, prefix+boltSeqKey, fmt.Appendf(nil, "%d", s.Seq))
		}
		if err == nil && m.known[scope] {
			err = w.Put(Table, prefix+boltKnownKey, []byte("1"))
		}
		if err != nil {
			return err
		}
	}
	w.OnCommit(func() {
		m.mu.Lock()
		clear(b.unsaved)
		b.tx = bolt.Transaction{}
		m.mu.Unlock()
	})
	return nil
}
