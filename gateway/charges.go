package gateway

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/quota"
)

// charged is the outcome of a request that takes from several buckets.
type charged struct {
	allowed bool
	short   int // index of the bucket that refused the request; 0 when allowed
	keys    []quota.Key
	limits  []bucket.Limit
	out     []bucket.Decision // each bucket's decision
}

// takeCharges takes a request's charges (see [quota.Service.Charges])
// from its account's buckets, all or none ([limiter.TakeAll]). The
// request's own category (the first charge) counts its outcome; each
// other bucket counts what it decided (one that was not short in a
// refused request counts nothing). An error means the store decided
// nothing.
func (g *Gateway) takeCharges(ctx context.Context, pol *policy, svc *quota.Service, account, region string, cs []quota.Charge, start time.Time) (charged, error) {
	c := charged{keys: make([]quota.Key, len(cs)), limits: make([]bucket.Limit, len(cs)), out: make([]bucket.Decision, len(cs))}
	reqs := make([]limiter.Request, len(cs))
	for i, ch := range cs {
		c.keys[i] = quota.Key{Service: svc.Name, Account: account, Region: region, Category: ch.Category.Name}
		c.limits[i], _ = g.limitOf(pol.cfg, c.keys[i])
		reqs[i] = limiter.Request{Key: c.keys[i].String(), Limit: c.limits[i], Tokens: ch.Tokens}
	}
	allowed, err := limiter.TakeAll(ctx, g.limiter, reqs, c.out)
	elapsed := time.Since(start)
	if err != nil {
		g.metrics.observe(pol.counters[cs[0].Category], false, err, elapsed)
		return c, err
	}
	c.allowed = allowed
	if !allowed {
		c.short = max(limiter.FirstDenied(c.out), 0)
	}
	for i, ch := range cs {
		switch {
		case i == 0:
			g.metrics.observe(pol.counters[ch.Category], allowed, nil, elapsed)
		case allowed || i == c.short:
			pol.counters[ch.Category].count(allowed)
		}
		if allowed || i == c.short {
			g.noteThrottled(c.keys[i], c.out[i], nil)
		}
	}
	return c, nil
}
