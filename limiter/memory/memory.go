// Package memory is a [limiter.Limiter] that keeps bucket state in this
// process: the store for a single gateway node.
//
// State is sharded by key hash, each shard a mutex and a map from key to the
// bucket's one-integer state. A take on a key already tracked allocates
// nothing. A bucket that has refilled to full is the same as one never
// used, so the store forgets it: memory holds only buckets in debt.
//
// # Memory bound
//
// Full buckets are swept out of a shard whenever the shard has doubled
// since its last sweep, and a shard's map is rebuilt when a sweep leaves it
// under a quarter of its peak, so Go's never-shrinking maps give the memory
// back. Under a flood of distinct keys the store therefore holds at most
// about twice the number of buckets in debt at the last sweep, plus 256
// entries per shard: the buckets in debt are those touched within their
// refill window (capacity ÷ rate: 2.5 s for ECS cluster-read, 20 s for
// Cloud Map). Each tracked bucket costs a copy of the key plus about 56 bytes
// of map entry (see BENCHMARKS.md).
//
// Buckets in debt are bounded too, by Options.MaxBuckets and
// Options.MaxKeyBytes (each divided evenly among the shards): a flood of
// distinct keys on a long refill window (300,000 values of a one-a-day
// rule) would otherwise hold every one of them for the whole window. A
// shard at its bound first forgets its full buckets; if it is still full,
// it evicts the eighth of its buckets closest to full (those that will be
// full soonest: they carry the least information, and a flood of one-hit
// keys is evicted before the few clients deep in debt), so a new key is
// always decided. An evicted bucket's next take starts from a full bucket:
// the store may then admit up to that bucket's remaining debt again.
// Evictions are counted ([Store.Evicted]).
package memory

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// Now returns the current time; nil means the system clock, read as
	// a Unix time that advances with the monotonic clock (so a step of
	// the wall clock neither freezes nor refills every bucket). Tests pass
	// a fake clock.
	Now func() time.Time
	// Shards is the number of independently locked shards, rounded up to
	// a power of two; 0 means 256.
	Shards int
	// MaxBuckets bounds the buckets held; 0 means DefaultMaxBuckets, a
	// negative value means no bound. See the package documentation for
	// what happens at the bound.
	MaxBuckets int
	// MaxKeyBytes bounds the bytes of the keys held; 0 means
	// DefaultMaxKeyBytes, a negative value means no bound.
	MaxKeyBytes int64
}

// Default bounds of a Store: about 150 MB of memory with keys of 64 bytes,
// about 100 MB with keys of 1 KB.
const (
	DefaultMaxBuckets  = 1 << 20
	DefaultMaxKeyBytes = 64 << 20
)

// minSweep is the size below which a shard is never swept.
const minSweep = 256

// Store is an in-memory [limiter.Limiter], safe for concurrent use.
type Store struct {
	shards []shard
	mask   uint64
	seed   maphash.Seed
	now    func() int64 // Unix nanoseconds

	// Per-shard bounds: buckets and bytes of keys; 0 means none.
	maxLen   int
	maxBytes int64
	evicted  atomic.Uint64
}

type shard struct {
	mu      sync.Mutex
	m       map[string]int64
	sweepAt int   // len(m) at which the next sweep runs
	peak    int   // largest len(m) since the map was last rebuilt
	bytes   int64 // bytes of the keys in m
	_       [64]byte
}

var _ limiter.Limiter = (*Store)(nil)

// New returns an empty store.
func New(opts Options) *Store {
	n := 256
	if opts.Shards > 0 {
		n = 1
		for n < opts.Shards {
			n <<= 1
		}
	}
	s := &Store{shards: make([]shard, n), mask: uint64(n - 1), seed: maphash.MakeSeed()}
	maxBuckets, maxBytes := opts.MaxBuckets, opts.MaxKeyBytes
	if maxBuckets == 0 {
		maxBuckets = DefaultMaxBuckets
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxKeyBytes
	}
	if maxBuckets > 0 {
		s.maxLen = max(1, maxBuckets/n)
	}
	if maxBytes > 0 {
		s.maxBytes = max(1, maxBytes/int64(n))
	}
	if opts.Now != nil {
		s.now = func() int64 { return opts.Now().UnixNano() }
	} else {
		// time.Since of a reading with a monotonic part reads only the
		// monotonic clock: one clock read instead of time.Now's two.
		base := time.Now()
		baseUnix := base.UnixNano()
		s.now = func() int64 { return baseUnix + int64(time.Since(base)) }
	}
	for i := range s.shards {
		s.shards[i].m = make(map[string]int64)
		s.shards[i].sweepAt = minSweep
	}
	return s
}

func (s *Store) shard(key string) *shard {
	return &s.shards[s.shardIndex(key)]
}

func (s *Store) shardIndex(key string) int {
	return int(maphash.String(s.seed, key) & s.mask)
}

// Take implements [limiter.Limiter]. It never blocks on I/O and ignores ctx.
func (s *Store) Take(_ context.Context, key string, limit bucket.Limit, n int64) (bucket.Decision, error) {
	err := limiter.Check(limit, n)
	if err != nil && !errors.Is(err, bucket.ErrExceedsCapacity) {
		return bucket.Decision{}, err
	}
	// A take over capacity is decided too: denied, RetryAfter Never.
	return s.take(key, limit, n, s.now()), err
}

// TakeBatch implements [limiter.Limiter], reading the clock once for the
// whole batch.
func (s *Store) TakeBatch(_ context.Context, reqs []limiter.Request, out []bucket.Decision) error {
	if err := limiter.CheckBatch(reqs, out); err != nil {
		return err
	}
	now := s.now()
	for i, r := range reqs {
		out[i] = s.take(r.Key, r.Limit, r.Tokens, now)
	}
	return nil
}

func (s *Store) take(key string, limit bucket.Limit, n int64, now int64) bucket.Decision {
	sh := s.shard(key)
	sh.mu.Lock()
	tat, tracked := sh.m[key]
	old := bucket.State(tat)
	next, d := limit.TakeAt(old, now, n)
	if next != old {
		s.store(sh, key, tracked, next, now)
	}
	sh.mu.Unlock()
	return d
}

// store writes a bucket's new state to sh, whose lock the caller holds,
// making room for a key not yet tracked.
func (s *Store) store(sh *shard, key string, tracked bool, next bucket.State, now int64) {
	if !tracked {
		if !s.room(sh, len(key), now) {
			// A key larger than a shard's whole budget is decided but
			// not kept, as if evicted at once.
			s.evicted.Add(1)
			return
		}
		// The map keeps the key: copy it, so a caller's larger buffer
		// is not kept alive with it.
		key = strings.Clone(key)
		sh.bytes += int64(len(key))
	}
	sh.m[key] = int64(next)
	if len(sh.m) >= sh.sweepAt {
		sh.sweep(now)
	}
}

// room makes room in sh for one more key of n bytes, within the store's
// bounds: it forgets full buckets, then evicts those closest to full. It
// reports false when the key alone exceeds the shard's byte budget.
func (s *Store) room(sh *shard, n int, now int64) bool {
	if s.maxBytes > 0 && int64(n) > s.maxBytes {
		return false
	}
	if !s.over(sh, n) {
		return true
	}
	sh.sweep(now)
	if !s.over(sh, n) {
		return true
	}
	// Evict the eighth of the shard that will be full soonest, and more
	// if the new key's bytes still do not fit.
	tats := make([]int64, 0, len(sh.m))
	for _, tat := range sh.m {
		tats = append(tats, tat)
	}
	slices.Sort(tats)
	evict := max(1, len(tats)/8)
	for i := evict - 1; ; i += evict {
		i = min(i, len(tats)-1)
		threshold := tats[i]
		for k, tat := range sh.m {
			if tat <= threshold {
				delete(sh.m, k)
				sh.bytes -= int64(len(k))
				s.evicted.Add(1)
			}
		}
		if !s.over(sh, n) || i == len(tats)-1 {
			return true
		}
	}
}

// over reports whether one more key of n bytes would exceed a bound.
func (s *Store) over(sh *shard, n int) bool {
	return (s.maxLen > 0 && len(sh.m) >= s.maxLen) || (s.maxBytes > 0 && sh.bytes+int64(n) > s.maxBytes)
}

// Evicted returns the number of buckets in debt the store has forgotten
// to stay within its bounds (Options.MaxBuckets, Options.MaxKeyBytes).
func (s *Store) Evicted() uint64 { return s.evicted.Load() }

// sweep forgets the shard's full buckets and, when most of the map is gone,
// rebuilds it so the memory is returned.
func (sh *shard) sweep(now int64) {
	sh.peak = max(sh.peak, len(sh.m))
	for k, tat := range sh.m {
		if tat <= now {
			delete(sh.m, k)
			sh.bytes -= int64(len(k))
		}
	}
	if live := len(sh.m); live*4 < sh.peak {
		// Sized for the next sweep, so the map does not regrow before it.
		m := make(map[string]int64, max(2*live, minSweep))
		for k, v := range sh.m {
			m[k] = v
		}
		sh.m, sh.peak = m, live
	}
	sh.sweepAt = max(2*len(sh.m), minSweep)
}

// Len returns the number of buckets the store holds: those in debt, plus
// full ones not yet swept.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Sweep forgets every full bucket now, rather than when a shard grows.
func (s *Store) Sweep() {
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweep(now)
		sh.mu.Unlock()
	}
}

// Health implements [limiter.HealthReporter]: a memory store is always
// ready.
func (s *Store) Health(context.Context) limiter.Health {
	return limiter.Health{Ready: true, Status: "memory"}
}
