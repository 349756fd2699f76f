package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// Increase is a Service Quotas increase request on the target's category,
// made and decided through package servicequotas (its Service, Policy and
// store, the same code the gateway runs) on the run's virtual clock. The
// approved values become the account's limit the moment they are
// approved, as they do on a node: the next take of the bucket uses them.
type Increase struct {
	// At is when the tenant asks (RequestServiceQuotaIncrease).
	At time.Duration
	// Burst is the burst (bucket capacity) asked for; 0 asks nothing.
	Burst int64
	// Rate is the rate (refill per second) asked for; 0 asks nothing.
	Rate float64
	// ApproveAt, when not zero, is when an operator approves what is still
	// PENDING then (the admin endpoint's approve); zero leaves the
	// Scenario's QuotaPolicy's answer as it is.
	ApproveAt time.Duration
}

// LimitChange is a change of the target's limit during a run.
type LimitChange struct {
	// At is when it took effect.
	At time.Duration
	// Limit is the target's limit from then on.
	Limit bucket.Limit
	// Why says what changed it: "approved by an operator" or "approved by
	// the policy".
	Why string
}

// maxIncrease is the most a Service Quotas request can ask for.
const maxIncrease = 1e10

// validIncreases checks s.Increases, with s's defaults applied.
func (s Scenario) validIncreases() error {
	if len(s.Increases) > 0 && !s.Limit.IsZero() {
		return invalid([]any{"increases"}, "increases start from the config's limit: give limit or increases, not both")
	}
	if len(s.Increases) > 100 {
		return invalid([]any{"increases"}, "%d increases, more than 100", len(s.Increases))
	}
	if err := s.QuotaPolicy.Validate(); err != nil {
		return &FieldError{Path: []any{"quota_policy"}, Msg: err.Error(), Err: err}
	}
	for i, in := range s.Increases {
		p := func(f string) []any { return []any{"increases", i, f} }
		switch {
		case in.At < 0 || in.At > s.Duration:
			return invalid(p("at"), "at %v must be in [0, %v]", in.At, s.Duration)
		case in.Burst < 0 || in.Burst > maxIncrease:
			return invalid(p("burst"), "burst %d must be in [0, %d]", in.Burst, int64(maxIncrease))
		case !(in.Rate >= 0 && in.Rate <= MaxRate):
			return invalid(p("rate"), "rate %v must be in [0, %v]", in.Rate, MaxRate)
		case in.Burst == 0 && in.Rate == 0:
			return invalid(p("burst"), "an increase asks for a burst, a rate or both")
		case in.ApproveAt != 0 && (in.ApproveAt < in.At || in.ApproveAt > s.Duration):
			return invalid(p("approve_at"), "approve_at %v must be in [at, %v]", in.ApproveAt, s.Duration)
		}
	}
	return nil
}

// quotas is the Service Quotas side of a run: the service, the open
// requests of each Increase and the buckets whose limit it may change.
type quotas struct {
	svc     *servicequotas.Service
	burst   string // the target category's quota codes
	rate    string
	service string // its service code
	ids     [][]string
	keys    []quota.Key
	base    []bucket.Limit
	changes []LimitChange
}

// newQuotas sets up the Service Quotas side of r's run.
func (r *runner) newQuotas(keys map[quota.Key]int) error {
	sc := r.sc
	svc, err := servicequotas.New(servicequotas.Options{Config: sc.Quota, Policy: sc.QuotaPolicy, Now: r.time})
	if err != nil {
		return fmt.Errorf("%w: quota_policy: %w", ErrInvalidScenario, err)
	}
	key, _, err := sc.Quota.Resolve(sc.Target.Service, sc.Target.Account, sc.Target.Region, sc.Target.Action)
	if err != nil {
		return &FieldError{Path: targetPath(sc.Target, err), Msg: err.Error(), Err: err}
	}
	q := &quotas{svc: svc, ids: make([][]string, len(sc.Increases))}
	for _, info := range svc.Catalog().Services() {
		if info.Config != key.Service {
			continue
		}
		qs, _ := svc.Catalog().Quotas(info.Code)
		for _, x := range qs {
			if x.Category != key.Category {
				continue
			}
			q.service = info.Code
			if x.Kind == servicequotas.Burst {
				q.burst = x.Code
			} else {
				q.rate = x.Code
			}
		}
	}
	if q.burst == "" || q.rate == "" {
		return invalid([]any{"increases"}, "no Service Quotas quota for category %q of service %q", key.Category, key.Service)
	}
	q.keys = make([]quota.Key, len(keys))
	for k, b := range keys {
		q.keys[b] = k
	}
	q.base = append([]bucket.Limit(nil), r.limits...)
	r.quotas = q
	for i, in := range sc.Increases {
		r.push(int64(in.At), evIncrease, int32(i), 0)
		if in.ApproveAt != 0 {
			r.push(int64(in.ApproveAt), evApprove, int32(i), 0)
		}
	}
	return nil
}

// increase makes the requests of Increase i.
func (r *runner) increase(i int32) {
	in, q, t := r.sc.Increases[i], r.quotas, r.sc.Target
	for _, ask := range []struct {
		code string
		v    float64
	}{{q.burst, float64(in.Burst)}, {q.rate, in.Rate}} {
		if ask.v == 0 {
			continue
		}
		req, err := q.svc.RequestIncrease(context.Background(), t.Account, t.Region, q.service, ask.code, ask.v)
		if err != nil {
			r.err = &FieldError{Path: []any{"increases", int(i)}, Msg: fmt.Sprintf("at %v: %v", in.At, err), Err: err}
			return
		}
		q.ids[i] = append(q.ids[i], req.ID)
		if req.Status == servicequotas.StatusApproved {
			r.apply("approved by the policy")
		}
	}
}

// approve approves what is still PENDING of Increase i.
func (r *runner) approve(i int32) {
	q := r.quotas
	for _, id := range q.ids[i] {
		_, err := q.svc.Decide(context.Background(), id, servicequotas.StatusApproved, "approved by the scenario's operator")
		if err != nil {
			continue // decided already, by the policy
		}
		r.apply("approved by an operator")
	}
}

// apply reads every bucket's limit from the service again.
func (r *runner) apply(why string) {
	q := r.quotas
	for b, k := range q.keys {
		r.limits[b] = q.svc.Limit(k, q.base[b])
	}
	c := LimitChange{At: time.Duration(r.now), Limit: r.limits[r.targetBucket], Why: why}
	if n := len(q.changes); n > 0 && q.changes[n-1].At == c.At {
		q.changes[n-1] = c // the burst and the rate of one approval: one change
		return
	}
	q.changes = append(q.changes, c)
}
