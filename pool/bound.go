package pool

// This file is the revisions a spec binds to their own runner
// (ServiceSpec.Bound): on Kubernetes, a traffic entry naming a revision
// and its Deployment. The pool runs each under exactly that name, so
// that after a restart, and on every tollgate replica given the same
// config, the revisions, their names and the split are the same.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tollgate/tollgate/pool/traffic"
)

// ErrTrafficFixed is wrapped by SetTraffic's error for a service whose
// traffic only its spec sets (ServiceSpec.TrafficFixed).
var ErrTrafficFixed = errors.New("pool: traffic is set by the config")

// checkBoundSpec checks s.Bound on its own: names as the pool names
// revisions, each once, with a runner, at most one the latest and it the
// newest.
func checkBoundSpec(s ServiceSpec) error {
	seen := map[string]bool{}
	highest, latest := 0, 0
	for _, b := range s.Bound {
		bad := func(format string, args ...any) error {
			return &traffic.Error{Service: s.Name, Entry: b.Entry, Msg: fmt.Sprintf(format, args...)}
		}
		n := revisionNumber(s.Name, b.Name)
		switch {
		case n == 0:
			return bad("bound revision %q is not named as revisions are (%s-00001, ...)", b.Name, s.Name)
		case seen[b.Name]:
			return bad("revision %s bound twice", b.Name)
		case b.Runner == nil && !b.Latest:
			return bad("bound revision %s has no runner", b.Name)
		case b.Latest && latest > 0:
			return bad("two bound revisions are the latest")
		}
		seen[b.Name] = true
		highest = max(highest, n)
		if b.Latest {
			latest = n
		}
	}
	if latest > 0 && latest < highest {
		return &traffic.Error{Service: s.Name, Entry: -1, Msg: fmt.Sprintf("the latest revision, %s, is bound older than another bound revision (%s)", revisionName(s.Name, latest), revisionName(s.Name, highest))}
	}
	return nil
}

// highestBound is the highest number of s's bound revisions, 0 without
// any.
func highestBound(s ServiceSpec) int {
	n := 0
	for _, b := range s.Bound {
		n = max(n, revisionNumber(s.Name, b.Name))
	}
	return n
}

// nextName is the name of the revision s's Template makes next in svc:
// the latest binding's, else the number after both the revisions svc
// made and the highest bound one; p.mu is held.
func (svc *service) nextName(s ServiceSpec) string {
	for _, b := range s.Bound {
		if b.Latest {
			return b.Name
		}
	}
	return revisionName(s.Name, max(svc.number, highestBound(s))+1)
}

// checkBound reports the bindings of s that svc's running revisions
// contradict: a name running on another runner, a runner running another
// revision, and a latest binding that names a running revision other
// than the latest (next, the revision about to be made, is "" when the
// Template is unchanged); p.mu is held.
func (svc *service) checkBound(s ServiceSpec, next string) error {
	for _, b := range s.Bound {
		bad := func(format string, args ...any) error {
			return &traffic.Error{Service: s.Name, Entry: b.Entry, Msg: fmt.Sprintf(format, args...)}
		}
		rv := svc.revisionByName(b.Name)
		switch {
		case b.Latest && next == "" && svc.latest != nil && svc.latest.Name() != b.Name:
			return bad("%s runs the latest revision, %s: bind it under that name (revisions are not renamed)", orRunner(b.Where), svc.latest.Name())
		case b.Latest && next != "" && rv != nil:
			return bad("revision %s is already running (%s): the changed template makes a new revision; bind it under a new name", b.Name, orRunner(rv.where))
		case b.Latest:
		case rv != nil && rv.Runner() != b.Runner:
			return bad("revision %s runs on %s, not %s: revisions are not renamed; bind %s under a new name", b.Name, orRunner(rv.where), orRunner(b.Where), orRunner(b.Where))
		case rv == nil:
			for _, o := range svc.revs {
				if o.Runner() == b.Runner {
					return bad("%s already runs revision %s: bind it under that name", orRunner(b.Where), o.Name())
				}
			}
		}
	}
	return nil
}

// boundNames are the names of s's bound revisions.
func boundNames(s ServiceSpec) []string {
	out := make([]string, 0, len(s.Bound))
	for _, b := range s.Bound {
		out = append(out, b.Name)
	}
	return out
}

// addBound makes and starts the bound revisions of s, other than the
// latest, that svc does not run, with s's engine config and limits, and
// keeps svc.revs ordered by number; p.mu is held and s was checked.
func (p *Pool) addBound(svc *service, s ServiceSpec) error {
	for _, b := range s.Bound {
		if rv := svc.revisionByName(b.Name); rv != nil {
			if rv.where == "" {
				rv.where = b.Where // made before it was bound
			}
			continue
		}
		if b.Latest {
			continue
		}
		svc.kept = slices.DeleteFunc(svc.kept, func(k keptRevision) bool { return k.name == b.Name })
		bs := s
		bs.Runner = b.Runner
		rv, err := p.newRevision(svc, bs, s.Engine, b.Name)
		if err != nil {
			return err
		}
		svc.revs = append(svc.revs, rv)
		p.log.Info("bound revision: running it under its name", "service", svc.name, "revision", b.Name, "on", orRunner(b.Where))
		p.start(rv)
	}
	sortRevisions(svc)
	return nil
}
