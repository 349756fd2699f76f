package pool

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/pool/traffic"
)

// stickyOf is s as the handler keeps it: nil for the zero value.
func stickyOf(s traffic.Sticky) *traffic.Sticky {
	if s == (traffic.Sticky{}) {
		return nil
	}
	return &s
}

// checkNames reports the first entry of t that names a revision svc
// neither runs nor keeps (next, when not "", is the revision about to be made, then the
// latest; bound are revisions about to run, BoundRevision), or that t
// would keep more than traffic.MaxRevisions running; p.mu is held.
func (svc *service) checkNames(t []traffic.Target, next string, bound []string) error {
	keep := map[string]bool{}
	if next != "" {
		keep[next] = true
	} else if svc.latest != nil {
		keep[svc.latest.Name()] = true
	}
	if cur := svc.cur.Load(); cur != nil {
		keep[cur.Name()] = true
	}
	for _, e := range t {
		if e.RevisionName != "" {
			keep[e.RevisionName] = true
		}
	}
	if len(keep) > traffic.MaxRevisions {
		return &traffic.Error{Service: svc.name, Entry: -1,
			Msg: fmt.Sprintf("would keep %d revisions running (the latest, the latest ready and those named); at most %d", len(keep), traffic.MaxRevisions)}
	}
	for i, e := range t {
		if e.RevisionName != "" && e.RevisionName != next && !slices.Contains(bound, e.RevisionName) &&
			svc.revisionByName(e.RevisionName) == nil && svc.keptByName(e.RevisionName) == nil {
			have := make([]string, 0, len(svc.revs)+len(svc.kept))
			for _, rv := range svc.revs {
				have = append(have, rv.Name())
			}
			for _, k := range svc.kept {
				have = append(have, k.name+" (retired)")
			}
			return &traffic.Error{Service: svc.name, Entry: i,
				Msg: fmt.Sprintf("revision %q is neither running nor kept (have: %s)", e.RevisionName, strings.Join(have, ", "))}
		}
		if k := svc.keptByName(e.RevisionName); k != nil && svc.revisionByName(e.RevisionName) == nil && !slices.Contains(bound, e.RevisionName) {
			// On Kubernetes every unbound revision ran on the section's
			// one Deployment: running an old one again would scale it
			// beside the revision it runs now.
			for _, rv := range svc.revs {
				if rv.Runner() == k.spec.Runner {
					return &traffic.Error{Service: svc.name, Entry: i,
						Msg: fmt.Sprintf("retired revision %s ran on %s, which now runs revision %s: bind each revision to its own Deployment (deployment:) to roll back", k.name, orRunner(k.where), rv.Name())}
				}
			}
		}
	}
	return nil
}

// reroute resolves svc.traffic to its revisions and publishes it, then
// retires the running revisions it leaves without a share or a tag,
// other than the latest and the latest ready; p.mu is held and the names
// were checked.
func (p *Pool) reroute(svc *service) {
	ready := svc.cur.Load()
	t := svc.traffic
	if len(t) == 0 {
		t = []traffic.Target{{LatestRevision: true, Percent: 100}}
	}
	keep := map[*rev]bool{svc.latest: true, ready: true}
	targets := make([]*rev, len(t))
	for i, e := range t {
		rv := ready
		if !e.LatestRevision {
			rv = svc.revisionByName(e.RevisionName)
		}
		keep[rv] = true
		targets[i] = rv
	}
	// t was checked: its percents sum to 100.
	rt := traffic.NewRouting(t, targets, ready, svc.revs)
	svc.route.Store(rt)
	svc.pruneOld()
	now := time.Now()
	var retired []*rev
	svc.revs = slices.DeleteFunc(svc.revs, func(rv *rev) bool {
		if keep[rv] || rv.Warming() {
			return false // kept, or a pending traffic change warms it up
		}
		by := p.drainBound(rv, now)
		rv.Retire(by)
		svc.keep(rv, now)
		svc.old = append(svc.old, rv)
		retired = append(retired, rv)
		return true
	})
	over := svc.overMax()
	for _, rv := range retired {
		p.log.Info("revision takes no traffic; draining it by its requests in flight", "service", svc.name, "revision", rv.Name(),
			"instances", rv.State().Instances, "over_max_instances", over[rv].revisionChange, "over_max_reason", overMaxReasonRevision,
			"stop_by", p.drainBound(rv, now).UTC().Format(time.RFC3339))
	}
}

// trafficString is a traffic block as the log and errors print it:
// "hello-00001 90%, latest 10% (tag canary)"; empty is "latest 100%".
func trafficString(t []traffic.Target) string {
	if len(t) == 0 {
		return "latest 100%"
	}
	var b strings.Builder
	for i, e := range t {
		if i > 0 {
			b.WriteString(", ")
		}
		if e.LatestRevision {
			b.WriteString("latest")
		} else {
			b.WriteString(e.RevisionName)
		}
		fmt.Fprintf(&b, " %d%%", e.Percent)
		if e.Tag != "" {
			fmt.Fprintf(&b, " (tag %s)", e.Tag)
		}
	}
	return b.String()
}
