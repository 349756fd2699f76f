package redis

import (
	"hash/maphash"
	"sync"

	"github.com/tollgate/tollgate/bucket"
)

const (
	denyShards   = 64
	denyMinSweep = 1024
)

// denyCache remembers, per limiter key, a lower bound of the state of an
// empty bucket on the store's clock: the instant Redis reported it would be
// full again, counted from when the request was sent. Only buckets left
// empty are stored, and an entry is useless once its bucket is full, so
// entries past their instant are swept whenever a shard doubles.
type denyCache struct {
	seed   maphash.Seed
	shards [denyShards]denyShard
}

type denyShard struct {
	mu      sync.Mutex
	m       map[string]denyEntry
	sweepAt int
	_       [64]byte
}

type denyEntry struct {
	tat  int64 // the bucket is full again at or after this instant
	sent int64 // when the request that reported it was sent
}

func newDenyCache() *denyCache {
	c := &denyCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]denyEntry)
		c.shards[i].sweepAt = denyMinSweep
	}
	return c
}

func (c *denyCache) shard(key string) *denyShard {
	return &c.shards[maphash.String(c.seed, key)%denyShards]
}

// lookup returns the decision for a take of n tokens at now if the cache
// knows the bucket holds no token at now: the decision Redis would make.
func (c *denyCache) lookup(key string, limit bucket.Limit, n int64, now int64) (bucket.Decision, bool) {
	if n < 1 || n > limit.Capacity() {
		return bucket.Decision{}, false
	}
	sh := c.shard(key)
	sh.mu.Lock()
	e, ok := sh.m[key]
	sh.mu.Unlock()
	if !ok {
		return bucket.Decision{}, false
	}
	// The next single token exists at tat + interval - burst; no take of
	// one token or more succeeds before. Stop short of it by 1/1024 of
	// the wait, for clocks running at different rates.
	one := e.tat + int64(limit.Interval()) - limit.Capacity()*int64(limit.Interval())
	if now >= one-(one-e.sent)>>10 {
		return bucket.Decision{}, false
	}
	_, d := limit.TakeAt(bucket.State(e.tat), now, n)
	if d.Allowed {
		return bucket.Decision{}, false
	}
	return d, true
}

// store records that a request sent at sent found the bucket of key empty,
// full again at tat.
func (c *denyCache) store(key string, tat, sent int64) {
	sh := c.shard(key)
	sh.mu.Lock()
	if e, ok := sh.m[key]; !ok || e.tat < tat {
		sh.m[key] = denyEntry{tat: tat, sent: sent}
		if len(sh.m) >= sh.sweepAt {
			for k, e := range sh.m {
				if e.tat <= sent {
					delete(sh.m, k)
				}
			}
			sh.sweepAt = max(2*len(sh.m), denyMinSweep)
		}
	}
	sh.mu.Unlock()
}

// len returns the number of entries, for tests.
func (c *denyCache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
