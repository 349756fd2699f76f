package cloudmap

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tollgate/tollgate/state/bolt"
)

// Table is the table of the Cloud Map registry's records in the embedded
// store and in an export (state.Record.Table).
const Table = "cloudmap"

// derivedTable holds what the embedded store derives from Table: the
// size of each unknown account's scope (sizePrefix + scope), so that the
// shared budget and each account's share across its regions are known at
// start without reading the scopes, and builtKey once it is complete. It
// is written in the transaction of the records it counts, left out of an
// export and rebuilt from the records when absent (after an import, or
// from a file of an earlier tollgate).
const derivedTable = bolt.DerivedPrefix + Table

const (
	sizePrefix = "size\x00"
	builtKey   = "#built"
)

// DefaultCacheBytes is the estimated memory (as Limits.UnknownBytes
// estimates it) of the scopes the embedded store keeps loaded when
// Options.CacheBytes is 0.
const DefaultCacheBytes = 64 << 20

// boltStore keeps the registry in the embedded store, under the key
// <scope> NUL <field> for each record the Redis store writes
// (eachRecord), beside <scope> NUL #seq (its Seq) and <scope> NUL #known
// (the account was a known one). An update returns only once its change
// is on disk; concurrent updates share a commit (bolt.Group).
//
// It is a cache: a scope is read from its key prefix when first used and
// kept in the memory store while recently used; beyond maxBytes of
// scopes (or maxCachedScopes of them), the least recently used scope
// whose every change is on disk is dropped, to be read again when asked
// for. Start reads only derivedTable's sizes.
type boltStore struct {
	mem      *memStore
	db       *bolt.DB
	group    *bolt.Group[scopeChange]
	maxBytes int64
	// Guarded by mem.mu: the loaded scopes, most recently used first,
	// and the sum of their sizes as last counted.
	lru   *list.List
	elems map[string]*list.Element
	held  int64
}

// scopeChange is one change of one scope; the zero change stands for
// the scope's own records (#seq, #known and its size).
type scopeChange struct {
	scope string
	ch    change
}

// loaded is the LRU entry of a loaded scope.
type loaded struct {
	scope string
	size  int64 // its size when last counted in held
	// used is set by a read, which holds mem.mu only for reading and so
	// cannot reorder the list: a scope found used at the back gets a
	// second chance at the front (as CLOCK does).
	used atomic.Bool
}

// Record keys of a scope besides its records (whose fields start with a
// kind and a colon).
const (
	boltSeqKey   = "#seq"
	boltKnownKey = "#known"
)

// newBoltStore reads what every unknown account holds of the budget and
// reads each scope when first used. cacheBytes 0 means DefaultCacheBytes.
func newBoltStore(lim Limits, db *bolt.DB, cacheBytes int64) (*boltStore, error) {
	if cacheBytes == 0 {
		cacheBytes = DefaultCacheBytes
	}
	b := &boltStore{mem: newMemStore(lim), db: db, maxBytes: cacheBytes, lru: list.New(), elems: map[string]*list.Element{}}
	b.group = bolt.NewGroup(db, &b.mem.mu, b.flush)
	if err := b.start(); err != nil {
		return nil, fmt.Errorf("cloudmap: reading the registry from %s: %w", db.Path(), err)
	}
	return b, nil
}

// start reads the sizes of the unknown accounts' scopes, building them
// from the records first if the file has none.
func (b *boltStore) start() error {
	built, err := b.db.Has(derivedTable, builtKey)
	if err != nil {
		return err
	}
	if !built {
		if err := b.build(); err != nil {
			return err
		}
	}
	m := b.mem
	return b.db.Read(func(r *bolt.Reader) error {
		return r.Each(derivedTable, sizePrefix, func(k, v []byte) error {
			scope := string(k[len(sizePrefix):])
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return fmt.Errorf("size of scope %s: %q: %w", scope, v, err)
			}
			m.budget.used += n
			m.addAccount(accountOf(scope), n)
			return nil
		})
	})
}

// build writes derivedTable from the records, one scope in memory at a
// time.
func (b *boltStore) build() error {
	var scopes []string
	if err := b.db.Read(func(r *bolt.Reader) error {
		return r.Each(Table, "", func(k, _ []byte) error {
			scope, _, ok := strings.Cut(string(k), "\x00")
			if !ok {
				return fmt.Errorf("key %q: no scope", k)
			}
			if len(scopes) == 0 || scopes[len(scopes)-1] != scope {
				scopes = append(scopes, scope)
			}
			return nil
		})
	}); err != nil {
		return err
	}
	sizes := map[string]int64{}
	for _, scope := range scopes {
		err := b.db.Read(func(r *bolt.Reader) error {
			s, known, _, err := readScope(r, scope)
			if err == nil && !known {
				sizes[scope] = s.size
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return b.db.Write(func(w *bolt.Writer) error {
		if err := w.DeletePrefix(derivedTable, sizePrefix); err != nil {
			return err
		}
		for scope, n := range sizes {
			if err := w.Put(derivedTable, sizePrefix+scope, strconv.AppendInt(nil, n, 10)); err != nil {
				return err
			}
		}
		return w.Put(derivedTable, builtKey, []byte("1"))
	})
}

// readScope reads one scope's records: its services, namespaces,
// operations and tags first, then their revisions and instances, which
// need their service; found tells whether it has any.
func readScope(r *bolt.Reader, scope string) (s *state, known, found bool, err error) {
	s = newState()
	prefix := scope + "\x00"
	for pass := range 2 {
		err := r.Each(Table, prefix, func(k, v []byte) error {
			found = true
			field := string(k[len(prefix):])
			late := strings.HasPrefix(field, kindInstance+":") || strings.HasPrefix(field, kindRevision+":")
			switch {
			case field == boltSeqKey:
				if pass == 0 {
					n, err := strconv.ParseInt(string(v), 10, 64)
					if err != nil {
						return fmt.Errorf("scope %s: seq %q: %w", scope, v, err)
					}
					s.Seq = n
				}
			case field == boltKnownKey:
				known = true
			case late == (pass == 1):
				return applyRecord(s, field, string(v))
			}
			return nil
		})
		if err != nil {
			return nil, false, false, err
		}
	}
	s.reindex()
	return s, known, found, nil
}

// scope makes scope loaded and the most recently used, reading it from
// the file if it is not (mem.mu held). A scope with nothing on disk is
// not loaded.
func (b *boltStore) scope(scope string) error {
	m := b.mem
	if e := b.elems[scope]; e != nil {
		b.lru.MoveToFront(e)
		return nil
	}
	var s *state
	var known, found bool
	var size []byte
	err := b.db.Read(func(r *bolt.Reader) (err error) {
		s, known, found, err = readScope(r, scope)
		if v := r.Get(derivedTable, sizePrefix+scope); v != nil {
			size = append(size, v...)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("cloudmap: reading scope %s from %s: %w", scope, b.db.Path(), err)
	}
	if !found {
		return nil // never written
	}
	if known {
		m.known[scope] = true
	} else {
		// Its size is counted in the budget since start, as it was when
		// written: keep that count.
		if n, err := strconv.ParseInt(string(size), 10, 64); err == nil {
			s.size = n
		}
		s.budget = &m.budget
	}
	m.scopes[scope] = s
	b.elems[scope] = b.lru.PushFront(&loaded{scope: scope, size: s.size})
	b.held += s.size
	return nil
}

// settle counts scope's size now in held (a scope its update created
// becomes loaded) and drops the least recently used scopes whose changes
// are all on disk while more than the bound is held (mem.mu held).
func (b *boltStore) settle(scope string) {
	m := b.mem
	if s := m.scopes[scope]; s != nil {
		e := b.elems[scope]
		if e == nil {
			e = b.lru.PushFront(&loaded{scope: scope})
			b.elems[scope] = e
		}
		l := e.Value.(*loaded)
		b.held += s.size - l.size
		l.size = s.size
	}
	for e := b.lru.Back(); e != nil && (b.held > b.maxBytes || len(b.elems) > maxCachedScopes); {
		prev := e.Prev()
		if l := e.Value.(*loaded); l.used.Swap(false) {
			b.lru.MoveToFront(e)
		} else if !b.group.Busy(l.scope) {
			b.lru.Remove(e)
			delete(b.elems, l.scope)
			delete(m.scopes, l.scope)
			delete(m.known, l.scope)
			b.held -= l.size
		}
		e = prev
	}
}

func (b *boltStore) view(_ context.Context, scope string, _ bool, fn func(*state) error) error {
	m := b.mem
	m.mu.RLock()
	if e := b.elems[scope]; e != nil {
		defer m.mu.RUnlock()
		e.Value.(*loaded).used.Store(true)
		return fn(m.scopes[scope])
	}
	m.mu.RUnlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := b.scope(scope); err != nil {
		return err
	}
	s, ok := m.scopes[scope]
	if !ok {
		s = newState()
	}
	defer b.settle(scope)
	return fn(s)
}

func (b *boltStore) update(_ context.Context, scope string, known bool, fn func(*state) error) error {
	m := b.mem
	m.mu.Lock()
	if err := b.scope(scope); err != nil {
		m.mu.Unlock()
		return err
	}
	// An account that becomes known leaves the budget: its #known and
	// size are written even when fn changes nothing.
	changed := known && !m.known[scope] && m.scopes[scope] != nil
	err := m.apply(scope, known, func(s *state) error {
		if s.dirty == nil {
			s.dirty = map[change]bool{}
		}
		seq := s.Seq
		defer func() {
			if s.Seq != seq || len(s.dirty) > 0 {
				changed = true
			}
		}()
		return fn(s)
	})
	if s := m.scopes[scope]; s != nil && changed {
		b.group.Note(scopeChange{scope: scope}, scope)
		for ch := range s.dirty {
			b.group.Note(scopeChange{scope, ch}, scope)
		}
		clear(s.dirty)
	} else if s != nil {
		clear(s.dirty)
	}
	b.settle(scope)
	m.mu.Unlock()
	if !changed {
		return err
	}
	if werr := b.group.Write(); werr != nil {
		return fmt.Errorf("cloudmap: %w", werr)
	}
	return err
}

// flush writes changes' records as the states hold them now (mem.mu
// held): for each scope, its records, its #seq and #known, and its size
// while its account is unknown.
func (b *boltStore) flush(w *bolt.Writer, changes map[scopeChange]string) error {
	m := b.mem
	byScope := map[string]map[change]bool{}
	for c := range changes {
		u := byScope[c.scope]
		if u == nil {
			u = map[change]bool{}
			byScope[c.scope] = u
		}
		if c.ch != (change{}) {
			u[c.ch] = true
		}
	}
	for scope, u := range byScope {
		s := m.scopes[scope]
		if s == nil {
			return fmt.Errorf("cloudmap: scope %s has changes not on disk but is not loaded", scope)
		}
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
			err = w.Put(Table, prefix+boltSeqKey, strconv.AppendInt(nil, s.Seq, 10))
		}
		if err == nil && m.known[scope] {
			err = w.Put(Table, prefix+boltKnownKey, []byte("1"))
		}
		if err == nil && m.known[scope] {
			err = w.Delete(derivedTable, sizePrefix+scope)
		} else if err == nil {
			err = w.Put(derivedTable, sizePrefix+scope, strconv.AppendInt(nil, s.size, 10))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
