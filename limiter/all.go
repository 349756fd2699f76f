package limiter

import (
	"context"

	"github.com/tollgate/tollgate/bucket"
)

// Atomic is implemented by stores that take from several buckets all or
// none in one step (limiter/memory): no other take sees the batch half
// applied.
type Atomic interface {
	// TakeAll decides reqs together: if every request would be allowed
	// (in order, a key named twice seeing its earlier take) all are
	// taken, else none is. When the batch is refused every decision has
	// Allowed false: a request that was short has its RetryAfter, the
	// others report their bucket as it is, untouched. An error means the
	// store decided nothing.
	TakeAll(ctx context.Context, reqs []Request, out []bucket.Decision) (allowed bool, err error)
}

// TakeAll takes reqs from l all or none, as [Atomic.TakeAll] describes:
// a request that several buckets throttle (ECS RunTask on Fargate) takes
// no token from any of them when one is short.
//
// A store that implements [Atomic] decides atomically. Any other store
// (limiter/redis, whose pipeline batches many callers' takes per script)
// is asked twice: first a look at every bucket (0 tokens), which refuses
// the batch without taking anything when one bucket is short; then the
// takes themselves. Between the two a concurrent take may empty a
// bucket; the takes that were then allowed keep their tokens (a partial
// take that errs toward throttling, never toward admitting more), and out
// shows them allowed. Keys should be distinct: the look sees each bucket
// once.
func TakeAll(ctx context.Context, l Limiter, reqs []Request, out []bucket.Decision) (bool, error) {
	if a, ok := l.(Atomic); ok {
		return a.TakeAll(ctx, reqs, out)
	}
	if err := CheckBatch(reqs, out); err != nil {
		return false, err
	}
	looks := make([]Request, len(reqs))
	for i, r := range reqs {
		looks[i] = Request{Key: r.Key, Limit: r.Limit}
	}
	if err := l.TakeBatch(ctx, looks, out); err != nil {
		return false, err
	}
	short := false
	for i, r := range reqs {
		// The decision the take would get now, from the look's state:
		// a bucket full again in ResetAfter. A short one replaces the
		// look; the others keep it, their bucket as it is.
		if _, d := r.Limit.TakeAt(bucket.State(out[i].ResetAfter), 0, r.Tokens); !d.Allowed {
			out[i], short = d, true
		}
	}
	if short {
		refuse(out)
		return false, nil
	}
	if err := l.TakeBatch(ctx, reqs, out); err != nil {
		return false, err
	}
	for _, d := range out {
		if !d.Allowed {
			return false, nil
		}
	}
	return true, nil
}

// refuse marks every decision of a refused batch denied.
func refuse(out []bucket.Decision) {
	for i := range out {
		out[i].Allowed = false
	}
}

// FirstDenied returns the index of the decision that refused a batch: the
// first with a RetryAfter (a bucket that was short), else the first
// denied one; -1 if every decision is allowed.
func FirstDenied(out []bucket.Decision) int {
	first := -1
	for i, d := range out {
		if d.Allowed {
			continue
		}
		if d.RetryAfter > 0 {
			return i
		}
		if first < 0 {
			first = i
		}
	}
	return first
}
