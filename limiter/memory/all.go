package memory

import (
	"context"
	"slices"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

var _ limiter.Atomic = (*Store)(nil)

// TakeAll implements [limiter.Atomic]: it locks the shards of every key
// of reqs (in shard order, so two batches cannot deadlock), decides each
// take on the state the earlier ones leave, and writes the new states only
// if all were allowed. It ignores ctx.
func (s *Store) TakeAll(_ context.Context, reqs []limiter.Request, out []bucket.Decision) (bool, error) {
	if err := limiter.CheckBatch(reqs, out); err != nil {
		return false, err
	}
	shards := make([]int, len(reqs))
	for i, r := range reqs {
		shards[i] = s.shardIndex(r.Key)
	}
	locked := slices.Clone(shards)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	for _, i := range locked {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range locked {
			s.shards[i].mu.Unlock()
		}
	}()
	now := s.now()
	next := make([]bucket.State, len(reqs))
	first := make([]int, len(reqs)) // index of the first request on the same key
	orig := make([]bucket.State, len(reqs))
	allowed := true
	for i, r := range reqs {
		first[i] = slices.IndexFunc(reqs[:i+1], func(q limiter.Request) bool { return q.Key == r.Key })
		var cur bucket.State
		if f := first[i]; f < i {
			// The same bucket again: it sees the earlier takes.
			cur = next[lastIndex(reqs[:i], r.Key)]
		} else {
			tat := s.shards[shards[i]].m[r.Key]
			orig[i], cur = bucket.State(tat), bucket.State(tat)
		}
		next[i], out[i] = r.Limit.TakeAt(cur, now, r.Tokens)
		allowed = allowed && out[i].Allowed
	}
	if !allowed {
		for i, r := range reqs {
			if out[i].Allowed {
				// Not short: report the bucket as it is, untouched.
				_, out[i] = r.Limit.TakeAt(orig[first[i]], now, 0)
			}
			out[i].Allowed = false
		}
		return false, nil
	}
	for i, r := range reqs {
		if lastIndex(reqs, r.Key) == i && next[i] != orig[first[i]] {
			// Tracked as of now: making room for an earlier key of the
			// batch may have evicted this one.
			sh := &s.shards[shards[i]]
			_, tracked := sh.m[r.Key]
			s.store(sh, r.Key, tracked, next[i], now)
		}
	}
	return true, nil
}

// lastIndex returns the index of the last request of reqs on key, or -1.
func lastIndex(reqs []limiter.Request, key string) int {
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Key == key {
			return i
		}
	}
	return -1
}
