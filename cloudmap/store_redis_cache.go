package cloudmap

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// cached is one node's copy of a scope.
type cached struct {
	wmu   sync.Mutex   // held by an update of this node from refresh to commit
	mu    sync.RWMutex // guards s and valid
	s     *state       // nil until first read
	valid bool         // s is the state at s.Seq in Redis
	read  atomic.Int64 // Unix ms when Redis last confirmed s
	// failed is when (wall clock, Unix ns) an update last failed to reach
	// Redis, 0 after a success: updates that were queued behind a failing
	// one fail at once instead of each waiting out the timeout.
	failed atomic.Int64
	// released tells that this node gave back, in Redis, the shared
	// budget a known account's scope held while it was unknown.
	released atomic.Bool

	// Guarded by the store's mu:
	key  string
	elem *list.Element // nil once forgotten
	size int64         // the bytes counted for it in the store's total
}

// maxCachedScopes bounds the scopes a node caches, whatever their size.
const maxCachedScopes = 4096

// cache returns the node's copy of scope, made the most recently used.
func (r *redisStore) cache(scope string) *cached {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.scopes[scope]
	if c != nil {
		r.lru.MoveToFront(c.elem)
		return c
	}
	for len(r.scopes) >= maxCachedScopes {
		r.forget(r.lru.Back().Value.(*cached))
	}
	c = &cached{key: scope}
	c.elem = r.lru.PushFront(c)
	r.scopes[scope] = c
	return c
}

// account counts c's state, as it is now, in the cache's bytes, and
// forgets the least recently used scopes other than c while the cache
// holds more than cacheBytes. A scope being read or updated when it is
// forgotten finishes on its copy, which then goes.
func (r *redisStore) account(c *cached) {
	c.mu.RLock()
	size := int64(0)
	if c.s != nil {
		size = c.s.size
	}
	c.mu.RUnlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.elem == nil {
		return // forgotten meanwhile
	}
	r.bytes += size - c.size
	c.size = size
	for r.bytes > r.cacheBytes {
		e := r.lru.Back()
		if e.Value == c {
			e = e.Prev()
		}
		if e == nil {
			break // c alone: a scope is read whole
		}
		r.forget(e.Value.(*cached))
	}
}

// forget drops c (r.mu held).
func (r *redisStore) forget(c *cached) {
	r.lru.Remove(c.elem)
	c.elem = nil
	delete(r.scopes, c.key)
	r.bytes -= c.size
}
