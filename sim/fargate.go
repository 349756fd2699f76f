package sim

// This file is the throttle of a call that takes from several buckets:
// ECS RunTask on Fargate takes a token from ECS's cluster-resource-modify
// bucket, one from Fargate's RunTask calls bucket and count from the
// tasks-launched bucket of its capacity (quota.Service.Charges), all or
// none (TakeAll), as the gateway's limiter.TakeAll does on limiter/memory.

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
)

// BucketSeries is one bucket's time series in a run whose calls take
// from several buckets.
type BucketSeries struct {
	// Category is the bucket's category, such as fargate-on-demand-tasks.
	Category string
	// Limit is its limit at the start.
	Limit bucket.Limit
	// Tokens are the whole tokens it holds at the end of each second.
	Tokens []int64
	// Taken are the tokens taken from it in each second.
	Taken []int64
	// Throttled are the calls it refused in each second: those it was
	// the bucket short of tokens for (and so took nothing from any).
	Throttled []int
}

// weighted reports whether group c of s sets RunTask parameters.
func (c Clients) weighted() bool {
	return c.Count != 0 || c.LaunchType != "" || c.CapacityProvider != ""
}

// runTaskBody is the body of the group's calls: the RunTask fields the
// gateway reads.
func (c Clients) runTaskBody() []byte {
	type provider struct {
		CapacityProvider string `json:"capacityProvider"`
		Weight           int    `json:"weight"`
	}
	var body struct {
		Count      int        `json:"count,omitempty"`
		LaunchType string     `json:"launchType,omitempty"`
		Strategy   []provider `json:"capacityProviderStrategy,omitempty"`
	}
	body.Count, body.LaunchType = c.Count, c.LaunchType
	if c.CapacityProvider != "" {
		body.Strategy = []provider{{CapacityProvider: c.CapacityProvider, Weight: 1}}
	}
	b, _ := json.Marshal(body) // strings and ints: it cannot fail
	return b
}

// charges returns the buckets a call of group i takes from, as the
// gateway resolves them (quota.Service.Charges on the body the group's
// RunTask parameters make); nil for a group that takes one token of its
// category.
func (s Scenario) charges(i int) ([]quota.Charge, error) {
	c := s.Clients[i]
	if !c.weighted() {
		return nil, nil
	}
	path := func(f string) []any { return []any{"clients", i, f} }
	svc, ok := s.Quota.Service(s.Target.Service)
	if !ok || !svc.Weighted(c.Action) {
		return nil, invalid(path("count"), "count, launch_type and capacity_provider are RunTask's: action %s of %s takes no weighted tokens", c.Action, s.Target.Service)
	}
	cs, err := svc.Charges(c.Action, c.runTaskBody(), nil)
	if err != nil {
		f := "count"
		var re *quota.RequestError
		if errors.As(err, &re) && c.Count >= 1 && c.Count <= 10 {
			f = "launch_type"
			if c.CapacityProvider != "" {
				f = "capacity_provider"
			}
		}
		return nil, &FieldError{Path: path(f), Msg: err.Error(), Err: err}
	}
	return cs, nil
}

// setCharges resolves the buckets of every group with RunTask
// parameters, adding those not yet in keys, and sets up their series.
func (r *runner) setCharges(keys map[quota.Key]int) error {
	sc := r.sc
	seen := map[int]bool{}
	var order []int
	for i := range r.groups {
		cs, err := sc.charges(i)
		if err != nil || cs == nil {
			if err != nil {
				return err
			}
			continue
		}
		g := &r.groups[i]
		g.charges = []Charge{{Bucket: int32(g.bucket), Tokens: cs[0].Tokens}}
		for _, ch := range cs[1:] {
			k := quota.Key{Service: sc.Target.Service, Account: sc.Target.Account, Region: sc.Target.Region, Category: ch.Category.Name}
			b, ok := keys[k]
			if !ok {
				limit, _ := sc.Quota.Limit(k)
				b = len(r.limits)
				keys[k] = b
				r.limits = append(r.limits, limit)
				r.states = append(r.states, 0)
			}
			g.charges = append(g.charges, Charge{Bucket: int32(b), Tokens: ch.Tokens})
		}
		g.out = make([]bucket.Decision, len(g.charges))
		for _, ch := range g.charges {
			if b := int(ch.Bucket); !seen[b] {
				seen[b] = true
				order = append(order, b)
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	names := make([]string, len(r.limits))
	for k, b := range keys {
		names[b] = k.Category
	}
	n := len(r.secs)
	r.bucketOf = make([]int, len(r.limits))
	for i := range r.bucketOf {
		r.bucketOf[i] = -1
	}
	for _, b := range order {
		r.bucketOf[b] = len(r.buckets)
		r.buckets = append(r.buckets, BucketSeries{Category: names[b], Limit: r.limits[b],
			Tokens: make([]int64, n), Taken: make([]int64, n), Throttled: make([]int, n)})
	}
	return nil
}

// take takes group g's tokens for one attempt: one of its category's, or
// every charge all or none. It returns whether the attempt was admitted
// and, if not, the short bucket's RetryAfter.
func (r *runner) take(g *group) (bool, time.Duration) {
	now := epoch + r.now
	if g.charges == nil {
		st, d := r.limits[g.bucket].TakeAt(r.states[g.bucket], now, 1)
		i := -1
		if r.bucketOf != nil {
			i = r.bucketOf[g.bucket]
		}
		if !d.Allowed {
			if i >= 0 {
				r.buckets[i].Throttled[r.secIndex()]++
			}
			return false, d.RetryAfter
		}
		r.states[g.bucket] = st
		if i >= 0 {
			r.buckets[i].Taken[r.secIndex()]++
		}
		return true, 0
	}
	k := r.secIndex()
	if short := TakeAll(r.limits, r.states, g.charges, now, g.out); short >= 0 {
		r.buckets[r.bucketOf[g.charges[short].Bucket]].Throttled[k]++
		return false, g.out[short].RetryAfter
	}
	for _, ch := range g.charges {
		r.buckets[r.bucketOf[ch.Bucket]].Taken[k] += ch.Tokens
	}
	return true, 0
}

// closeBuckets records the tokens each bucket of the series holds at the
// end of second k.
func (r *runner) closeBuckets(k int) {
	if k >= len(r.secs) {
		return
	}
	for b, i := range r.bucketOf {
		if i < 0 {
			continue
		}
		_, d := r.limits[b].TakeAt(r.states[b], epoch+r.now, 0)
		r.buckets[i].Tokens[k] = d.Remaining
	}
}
