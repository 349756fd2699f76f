package gateway

import (
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
)

// The takes of a batch mostly repeat a few services and actions, and so a
// few categories and limits. serveBatch looks each distinct one up, and
// encodes the constant part of its answers, once per batch.

// takeKind is a service and action (or category) a take of the batch
// named, and what they resolved to.
type takeKind struct {
	service, action, category string
	svc                       *quota.Service
	cat                       *quota.Category
}

// maxKinds bounds the kinds a batch remembers, so a batch of all-distinct
// kinds costs a bounded search per take.
const maxKinds = 8

// resolveBatched is resolve for a take of a batch: a take whose service
// and action (or category) an earlier take of the batch already resolved
// skips their lookups. Any other take, and every invalid one, goes through
// resolve, so the errors are resolve's.
func (g *Gateway) resolveBatched(cfg *quota.Config, req *TakeRequest, kinds *[]takeKind) (resolved, error) {
	for i := range *kinds {
		k := &(*kinds)[i]
		if k.service != req.Service || k.action != req.Action || k.category != req.Category {
			continue
		}
		if !quota.ValidAccount(req.Account) || !cfg.ServesRegion(req.Region) {
			break // resolve writes the error
		}
		return g.resolveBucket(cfg, req, k.svc, k.cat)
	}
	r, err := g.resolve(cfg, req)
	if err == nil && req.Request == nil && len(*kinds) < maxKinds {
		*kinds = append(*kinds, takeKind{req.Service, req.Action, req.Category, r.svc, r.cat})
	}
	return r, err
}

// resultFrags holds, for the distinct (service, category, limit) of a
// batch's answers, the bytes of a result between its "allowed" and its
// "remaining" values: `,"service":…,"category":…,"limit":{…},"remaining":`.
type resultFrags struct {
	buf   []byte
	frags []resultFrag
}

type resultFrag struct {
	svc        *quota.Service
	cat        *quota.Category
	limit      bucket.Limit
	start, end int
}

func (f *resultFrags) reset() {
	clear(f.frags)
	f.buf, f.frags = f.buf[:0], f.frags[:0]
}

// appendResult appends r's answer with decision d: the bytes of
// toResponse(r, d).appendJSON.
func (f *resultFrags) appendResult(b []byte, r *resolved, d bucket.Decision) []byte {
	frag := f.frag(r)
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, frag...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, ceilMillis(d.RetryAfter), 10)
	b = append(b, `,"reset_after_ms":`...)
	b = strconv.AppendInt(b, ceilMillis(d.ResetAfter), 10)
	return append(b, '}')
}

// frag returns r's constant part, encoding it if no earlier result of the
// batch had it.
func (f *resultFrags) frag(r *resolved) []byte {
	for i := len(f.frags) - 1; i >= 0; i-- {
		if x := &f.frags[i]; x.cat == r.cat && x.svc == r.svc && x.limit == r.limit {
			return f.buf[x.start:x.end]
		}
		if len(f.frags)-i == maxKinds {
			break
		}
	}
	start := len(f.buf)
	f.buf = append(f.buf, `,"service":`...)
	f.buf, _ = jsontext.AppendQuote(f.buf, r.svc.Name)
	f.buf = append(f.buf, `,"category":`...)
	f.buf, _ = jsontext.AppendQuote(f.buf, r.cat.Name)
	f.buf = append(f.buf, `,"limit":{"capacity":`...)
	f.buf = strconv.AppendInt(f.buf, r.limit.Capacity(), 10)
	f.buf = append(f.buf, `,"refill_per_second":`...)
	f.buf = strconv.AppendFloat(f.buf, r.limit.RefillPerSecond(), 'f', -1, 64)
	f.buf = append(f.buf, `},"remaining":`...)
	f.frags = append(f.frags, resultFrag{r.svc, r.cat, r.limit, start, len(f.buf)})
	return f.buf[start:]
}
