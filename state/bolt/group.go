package bolt

import "sync"

// Group writes what its owner changed in memory to a DB, so that a write
// returns only once its change is on disk and concurrent writes share a
// commit. The owner notes each changed record (Note) under its own lock,
// then calls Write; the commit that follows takes every change noted so
// far and hands them to the owner's flush, which writes the records as
// memory holds them then.
//
// A commit moves the noted changes to unsaved; unsaved empties only once
// a commit succeeded (bbolt's OnCommit), so that a group rolled back and
// retried writes them again, and within one transaction each change is
// written once (by the first write of the group). Each change belongs to
// an owner (a scope, an account): Busy tells whether an owner has a change
// not yet on disk, so that the owner's cache never drops what only memory
// holds.
type Group[K comparable] struct {
	db      *DB
	mu      sync.Locker
	flush   func(w *Writer, changes map[K]string) error
	pending map[K]string // noted, not yet taken by a commit; key -> owner
	unsaved map[K]string // taken by a commit not yet on disk
	busy    map[string]int
	// tx is the transaction that last wrote unsaved: the other writes of
	// its group write only what they take from pending.
	tx Transaction
}

// NewGroup returns a Group writing to db. mu is the owner's lock, which
// guards what flush reads and the Group's own state: Note and Busy are
// called with it held, Write without. flush writes the records of
// changes (each change's key and its owner) as memory holds them; it
// runs with mu held, and may run more than once for one change.
func NewGroup[K comparable](db *DB, mu sync.Locker, flush func(w *Writer, changes map[K]string) error) *Group[K] {
	return &Group[K]{db: db, mu: mu, flush: flush, pending: map[K]string{}, unsaved: map[K]string{}, busy: map[string]int{}}
}

// Note records that k, which belongs to owner, changed; mu held.
func (g *Group[K]) Note(k K, owner string) {
	if _, ok := g.pending[k]; ok {
		return
	}
	if _, ok := g.unsaved[k]; !ok {
		g.busy[owner]++
	}
	g.pending[k] = owner
}

// Busy reports whether owner has a change that is not on disk yet; mu
// held.
func (g *Group[K]) Busy(owner string) bool { return g.busy[owner] > 0 }

// Pending reports whether a change was noted that no commit took yet; mu
// held.
func (g *Group[K]) Pending() bool { return len(g.pending) > 0 }

// Write commits every change noted so far and returns once it is on disk
// (or the commit failed); mu not held.
func (g *Group[K]) Write() error { return g.db.Write(g.commit) }

func (g *Group[K]) commit(w *Writer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	write := g.unsaved
	if g.tx == w.Transaction() {
		write = map[K]string{}
	}
	g.tx = w.Transaction()
	for k, owner := range g.pending {
		g.unsaved[k] = owner
		write[k] = owner
	}
	clear(g.pending)
	if len(write) > 0 {
		if err := g.flush(w, write); err != nil {
			return err
		}
	}
	w.OnCommit(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for k, owner := range g.unsaved {
			if _, ok := g.pending[k]; ok {
				continue
			}
			if g.busy[owner]--; g.busy[owner] <= 0 {
				delete(g.busy, owner)
			}
		}
		clear(g.unsaved)
		g.tx = Transaction{}
	})
	return nil
}
