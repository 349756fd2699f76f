package pool

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/revision"
)

// rev is one revision of a service as the pool holds it: the running
// revision (package revision), and what the pool knows of it beyond what
// runs. The fields are guarded by Pool.mu.
type rev struct {
	*revision.Revision
	spec      ServiceSpec // what it was made from, to make it again (keptRevision)
	created   time.Time   // when it was first made (keptRevision)
	where     string      // what its runner runs, when bound (BoundRevision.Where); else ""
	deploying bool        // its rollout waits for its first instances (rollout)
	failed    string      // why its last rollout failed (no instance ready in time); "" if none did
}

// revisionName is the name of a service's n-th revision, as Knative
// names them: hello-00001.
func revisionName(service string, n int) string {
	return fmt.Sprintf("%s-%05d", service, n)
}

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
