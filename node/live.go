package node

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/rls"
)

// poolSamples reports p's autoscaled services to the live view once a
// second.
func poolSamples(p *pool.Pool) func() []liveview.ServiceSample {
	return func() []liveview.ServiceSample {
		status := p.Status()
		out := make([]liveview.ServiceSample, 0, len(status))
		for _, s := range status {
			ls := liveview.ServiceSample{Name: s.Name, Instances: map[string]int{}, Recommended: s.Recommended,
				Driver: s.Driver, Pending: s.Pending, Rejected: s.Rejected}
			for _, in := range s.Instances {
				ls.Instances[in.State]++
			}
			ls.Revisions = revisionSamples(p, s)
			for _, e := range s.Scales {
				ls.Scales = append(ls.Scales, liveview.ScaleDecision{Time: e.Time, From: e.From, To: e.To, Driver: e.Driver,
					Reason: scaleWhy(e)})
			}
			out = append(out, ls)
		}
		return out
	}
}

// revisionSamples counts s's instances per revision, with each running
// revision's share of traffic and tags from p's revisions listing; a
// retired revision still draining takes 0 %. By name, oldest first.
func revisionSamples(p *pool.Pool, s pool.ServiceStatus) []liveview.RevisionSample {
	byName := map[string]*liveview.RevisionSample{}
	add := func(name string) *liveview.RevisionSample {
		rs := byName[name]
		if rs == nil {
			rs = &liveview.RevisionSample{Name: name}
			byName[name] = rs
		}
		return rs
	}
	if ts, err := p.Revisions(s.Name); err == nil { // else removed since Status
		for _, rv := range ts.Revisions {
			rs := add(rv.Name)
			rs.Percent, rs.Tags = rv.Percent, rv.Tags
		}
	}
	for _, in := range s.Instances {
		add(in.Revision).Instances++
	}
	out := make([]liveview.RevisionSample, 0, len(byName))
	for _, rs := range byName {
		out = append(out, *rs)
	}
	slices.SortFunc(out, func(a, b liveview.RevisionSample) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// scaleWhy says, for the live page, why a scale decision was taken: the
// reason of the scale log line in words, then the metrics behind it.
func scaleWhy(e pool.ScaleEvent) string {
	var head string
	switch e.Reason {
	case "metrics":
		head = fmt.Sprintf("the %s metric needs %d", e.Driver, e.DriverCount)
	case "requests waiting":
		head = "requests waited with too few instances ready"
		if e.From == 0 {
			head = "a request arrived with no instance running (scale from zero)"
		}
	case "idle timeout":
		head = "no request for the idle timeout: scale to zero"
	case "instance exited":
		head = "the last instance exited on its own (crashed or failed to start) with no request waiting: the next request starts one"
		if e.To > 0 {
			head = "the last instance exited on its own (crashed or failed to start): min instances start its replacement"
		}
	case "max instances":
		head = fmt.Sprintf("held at max instances (the %s metric asked for %d)", e.Driver, e.DriverCount)
	case "min instances":
		head = fmt.Sprintf("kept at min instances (the metrics asked for %d)", e.DriverCount)
	case "":
		head = fmt.Sprintf("%s asked for %d", e.Driver, e.DriverCount)
	default:
		head = fmt.Sprintf("%s (the %s metric asked for %d)", e.Reason, e.Driver, e.DriverCount)
	}
	if e.DecidedOn == "every replica's load" {
		return fmt.Sprintf("%s; %d in flight through every replica on %d ready (instances needed by cpu %.2f, concurrency %.2f, act %.2f)",
			head, e.InFlight, e.Ready, e.NeedCPU, e.NeedConcurrency, e.NeedACT)
	}
	return fmt.Sprintf("%s; %d in flight on %d ready (instances needed by cpu %.2f, concurrency %.2f, act %.2f)",
		head, e.InFlight, e.Ready, e.NeedCPU, e.NeedConcurrency, e.NeedACT)
}

// rlsLive puts the Envoy rate limit service's decisions into the live
// view beside the AWS ones: the domain in place of the service, the
// rule's key in place of the category, and a bucket named by its
// descriptor (in the account column; no region).
type rlsLive struct {
	rec    *liveview.Recorder
	series sync.Map // [2]string{domain, rule} → *liveview.Series
}

// Decided implements rls.Observer.
func (l *rlsLive) Decided(d rls.Decided) {
	name := [2]string{d.Domain, d.Rule}
	s, ok := l.series.Load(name)
	if !ok {
		s, _ = l.series.LoadOrStore(name, l.rec.Series(d.Domain, d.Rule))
	}
	s.(*liveview.Series).Count(d.Allowed)
	k := quota.Key{Service: d.Domain, Account: d.Descriptor, Category: d.Rule}
	if !d.Allowed {
		l.rec.Throttled(k)
		return
	}
	if d.Capacity > 0 {
		l.rec.Used(k, d.Used, d.Capacity)
	}
}
