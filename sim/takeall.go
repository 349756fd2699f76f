package sim

// This file is the all-or-none take of a call that takes from several
// buckets — ECS RunTask on Fargate (quota.Service.Charges) — shared by
// Run, the Player and package replay, as the gateway's limiter.TakeAll
// decides it on limiter/memory.

import "github.com/tollgate/tollgate/bucket"

// Charge is one bucket a call takes from and how many tokens: a
// quota.Charge resolved to a bucket index.
type Charge struct {
	Bucket int32
	Tokens int64
}

// TakeAll takes every charge of cs at instant now (Unix nanoseconds) from
// the buckets of limits and states, all or none: each take sees the state
// the earlier ones of the same bucket leave, and states is written only
// when every take is allowed. out receives each charge's decision (len
// ≥ len(cs)). It returns -1 when the call is allowed, else the index in cs
// of the bucket it was short of, chosen as limiter.FirstDenied chooses:
// the first refused with a RetryAfter, else the first refused.
func TakeAll(limits []bucket.Limit, states []bucket.State, cs []Charge, now int64, out []bucket.Decision) int {
	var small [8]bucket.State
	next := small[:0]
	if len(cs) > len(small) {
		next = make([]bucket.State, 0, len(cs))
	}
	allowed := true
	for i, ch := range cs {
		cur := states[ch.Bucket]
		for j := i - 1; j >= 0; j-- { // the same bucket again sees the earlier take
			if cs[j].Bucket == ch.Bucket {
				cur = next[j]
				break
			}
		}
		var st bucket.State
		st, out[i] = limits[ch.Bucket].TakeAt(cur, now, ch.Tokens)
		next = append(next, st)
		allowed = allowed && out[i].Allowed
	}
	if allowed {
		for i, ch := range cs {
			states[ch.Bucket] = next[i]
		}
		return -1
	}
	short := -1
	for i, d := range out[:len(cs)] {
		if d.Allowed {
			continue
		}
		if d.RetryAfter > 0 {
			return i
		}
		if short < 0 {
			short = i
		}
	}
	return short
}
