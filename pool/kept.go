package pool

// This file is the revisions a service keeps after they stopped taking
// traffic, scaled to zero, as Knative and Cloud Run keep them: a traffic
// change naming one (a rollback) runs it again under its name, on the
// runner and with the config it last had, and moves traffic to it once
// it is ready, as to any revision whose share grows.

import (
	"fmt"
	"slices"
	"time"

	"github.com/tollgate/tollgate/pool/traffic"
)

// Bounds on the retired revisions a service keeps, Knative's revision
// garbage collection defaults (config-gc): the newest KeepMinRevisions
// are always kept; an older one is forgotten once it was made more than
// KeepSinceCreate ago and took traffic last more than KeepSinceActive
// ago; never more than KeepMaxRevisions.
const (
	KeepMinRevisions = 20             // min-non-active-revisions
	KeepMaxRevisions = 1000           // max-non-active-revisions
	KeepSinceCreate  = 48 * time.Hour // retain-since-create-time
	KeepSinceActive  = 15 * time.Hour // retain-since-last-active-time
)

// keep remembers the retired revision rv, replacing an earlier entry of
// its name, and forgets those the bounds no longer keep; p.mu is held.
func (svc *service) keep(rv *rev, now time.Time) {
	st := rv.State()
	s := rv.spec
	s.Engine = st.Config
	s.RequestTimeout, s.MaxPending, s.StopGrace = st.Limits.RequestTimeout, st.Limits.MaxPending, st.Limits.StopGrace
	s.Runner = rv.Runner()
	k := keptRevision{name: rv.Name(), spec: s, where: rv.where, created: rv.created, retired: now}
	svc.kept = slices.DeleteFunc(svc.kept, func(o keptRevision) bool { return o.name == k.name })
	svc.kept = gcKept(append(svc.kept, k), now)
}

// gcKept is kept, ordered by retirement oldest first, without the
// revisions Knative's defaults would collect at now.
func gcKept(kept []keptRevision, now time.Time) []keptRevision {
	slices.SortStableFunc(kept, func(a, b keptRevision) int { return a.retired.Compare(b.retired) })
	if n := len(kept) - KeepMaxRevisions; n > 0 {
		kept = slices.Delete(kept, 0, n)
	}
	old := len(kept) - KeepMinRevisions // those before it may be collected
	out := kept[:0]
	for i, k := range kept {
		if i < old && now.Sub(k.created) > KeepSinceCreate && now.Sub(k.retired) > KeepSinceActive {
			continue
		}
		out = append(out, k)
	}
	clear(kept[len(out):])
	return out
}

// revive runs again each kept revision t names, under its name, scaled to
// zero until a traffic change gives it a share (shift then starts the
// instances it needs); p.mu is held and the names were checked.
func (p *Pool) revive(svc *service, t []traffic.Target) error {
	if err := p.resolveKept(svc, t); err != nil {
		return err
	}
	for _, e := range t {
		if e.RevisionName == "" || svc.revisionByName(e.RevisionName) != nil {
			continue
		}
		k := svc.keptByName(e.RevisionName)
		if k == nil {
			continue
		}
		rv, err := p.newRevision(svc, k.spec, k.spec.Engine, k.name)
		if err != nil {
			return err
		}
		rv.where, rv.created = k.where, k.created
		svc.kept = slices.DeleteFunc(svc.kept, func(o keptRevision) bool { return o.name == rv.Name() })
		svc.revs = append(svc.revs, rv)
		sortRevisions(svc)
		p.log.Info("retired revision named by the traffic: running it again", "service", svc.name, "revision", rv.Name(), "on", orRunner(rv.where))
		p.start(rv)
	}
	return nil
}

// resolveKept makes again, from their recipes, the specs of the
// revisions kept from before a restart that t names and svc does not
// run, and refuses one whose runner now runs another revision (on
// Kubernetes, the section's one Deployment), as checkNames refuses it
// for a revision retired since the start; p.mu is held.
func (p *Pool) resolveKept(svc *service, t []traffic.Target) error {
	for i, e := range t {
		k := svc.keptByName(e.RevisionName)
		if e.RevisionName == "" || k == nil || svc.revisionByName(k.name) != nil || k.spec.Runner != nil {
			continue
		}
		if err := p.keptSpec(svc, k); err != nil {
			return err
		}
		for _, rv := range svc.revs {
			if rv.Runner() == k.spec.Runner {
				return &traffic.Error{Service: svc.name, Entry: i,
					Msg: fmt.Sprintf("retired revision %s ran on %s, which now runs revision %s: bind each revision to its own Deployment (deployment:) to roll back", k.name, orRunner(k.where), rv.Name())}
			}
		}
	}
	return nil
}

// keptSpec makes k's spec again from its recipe when it was kept before
// a restart; p.mu is held.
func (p *Pool) keptSpec(svc *service, k *keptRevision) error {
	if k.spec.Runner != nil {
		return nil
	}
	if p.persist == nil || k.recipe == nil {
		return fmt.Errorf("%w: service %s: revision %s cannot be made again (nothing says how)", ErrInvalidSpec, svc.name, k.name)
	}
	s, err := p.persist.store.RevisionSpec(svc.name, k.recipe)
	if err != nil {
		return fmt.Errorf("service %s: revision %s: %w", svc.name, k.name, err)
	}
	s.Name, s.Recipe = svc.name, k.recipe
	k.spec = s
	return nil
}
