package gateway

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/quota"
)

// maxCharges is the most buckets one request takes from (ECS RunTask on
// Fargate mixing On-Demand and Spot: four).
const maxCharges = 4

// takeCharges takes a request's charges (see [quota.Service.Charges])
// from its account's buckets, all or none ([limiter.TakeAll]). It returns
// whether the request is allowed and, when it is not, the category that
// refused it and that bucket's decision. The request's own category
// counts its outcome; each other bucket counts what it decided (a bucket
// that was not short in a refused request counts nothing).
func (g *Gateway) takeCharges(ctx context.Context, pol *policy, svc *quota.Service, account, region string, cs []quota.Charge, start time.Time) (allowed bool, denied *quota.Category, d bucket.Decision, key quota.Key, err error) {
	var (
		reqsA [maxCharges]limiter.Request
		outA  [maxCharges]bucket.Decision
		keysA [maxCharges]quota.Key
	)
	reqs, out, keys := reqsA[:0], outA[:len(cs)], keysA[:0]
	if len(cs) > maxCharges {
		out = make([]bucket.Decision, len(cs))
	}
	for _, c := range cs {
		k := quota.Key{Service: svc.Name, Account: account, Region: region, Category: c.Category.Name}
		limit, _ := g.limitOf(pol.cfg, k)
		keys = append(keys, k)
		reqs = append(reqs, limiter.Request{Key: k.String(), Limit: limit, Tokens: c.Tokens})
	}
	allowed, err = limiter.TakeAll(ctx, g.limiter, reqs, out)
	elapsed := time.Since(start)
	if err != nil {
		g.metrics.observe(pol.counters[cs[0].Category], false, err, elapsed)
		return false, cs[0].Category, bucket.Decision{}, keys[0], err
	}
	short := -1
	if !allowed {
		short = limiter.FirstDenied(out)
	}
	for i, c := range cs {
		switch {
		case i == 0:
			g.metrics.observe(pol.counters[c.Category], allowed, nil, elapsed)
		case allowed || i == short:
			pol.counters[c.Category].count(allowed)
		}
		if allowed || i == short {
			g.noteThrottled(keys[i], out[i], nil)
		}
	}
	if allowed {
		return true, nil, out[0], keys[0], nil
	}
	return false, cs[short].Category, out[short], keys[short], nil
}
