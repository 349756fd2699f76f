package pool

import (
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/revision"
)

// newRevision makes svc's revision name on s's runner with cfg, and
// counts its number as made (svc.number); p.mu is held.
func (p *Pool) newRevision(svc *service, s ServiceSpec, cfg autoscale.Config, name string) (*rev, error) {
	svc.number = max(svc.number, revisionNumber(svc.name, name))
	r, err := revision.New(revision.Options{Service: svc.name, Name: name, Config: cfg, Runner: s.Runner, Limits: s.limits(),
		Logger: p.log, Metrics: p.m, Registrar: s.Registrar, Liveness: s.Liveness, OverMaxGrace: p.overMaxGrace})
	if err != nil {
		return nil, err
	}
	rv := &rev{Revision: r, spec: s, created: time.Now()}
	for _, b := range s.Bound {
		if b.Name == name {
			rv.where = b.Where
		}
	}
	return rv, nil
}

// start runs a revision's loop under Run, once Run has begun; p.mu is held.
// A revision that ends before the pool (retired) takes its series along.
func (p *Pool) start(rv *rev) {
	if p.ctx == nil || p.ctx.Err() != nil {
		return
	}
	ctx := p.ctx
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		rv.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		p.mu.RLock()
		svc := p.services[rv.Service()]
		back := svc != nil && svc.revisionByName(rv.Name()) != nil // removed, then added again
		p.mu.RUnlock()
		if !back {
			rv.RemoveSeries()
		}
	}()
}

// carryHistory seeds rv's engine with the load history of the revisions
// from, whose traffic it takes over whole (revision.CarryHistory).
func carryHistory(rv *rev, from []*rev) {
	rs := make([]*revision.Revision, 0, len(from))
	for _, f := range from {
		if f != nil {
			rs = append(rs, f.Revision)
		}
	}
	rv.CarryHistory(rs...)
}

// notReadyReason says why rv has no instance ready: its last start's
// failure, or its readiness check.
func notReadyReason(rv *rev) string {
	if why := rv.State().StartErr; why != "" {
		return why
	}
	return "no instance passed its readiness check"
}
