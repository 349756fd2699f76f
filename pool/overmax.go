package pool

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/pool/revision"
)

// overMaxReasonRevision labels instances over max that belong to a
// revision replaced by a traffic change or a new revision.
const overMaxReasonRevision = "revision_change"

// drainBound is when a revision retired at now stops its instances even
// if busy: its requests end within the request timeout (and the moment
// its 504 takes), so the drain is bounded by that, by the pool's drain
// timeout and by MaxOverMaxGrace.
func (p *Pool) drainBound(rv *rev, now time.Time) time.Time {
	rt := rv.State().Limits.RequestTimeout + revision.RequestTimeoutGrace
	return now.Add(min(p.drainTimeout, rt, MaxOverMaxGrace))
}

// overMaxCount is one revision's instances over max, by reason.
type overMaxCount struct {
	revisionChange int // a retired revision's, finishing their requests
	unhealthy      int // a running revision's unhealthy ones (with a liveness check)
}

// overMax is, for each revision of svc that may run instances over max,
// how many and why: a running revision with a liveness check, its
// unhealthy instances beyond its own max instances; a retired revision
// still draining, its share of the instances of every revision beyond
// the service's max instances (the latest revision's), those already
// counted as unhealthy left out, counted against the retired revisions
// oldest first. p.mu is held.
func (svc *service) overMax() map[*rev]overMaxCount {
	svc.pruneOld()
	out := map[*rev]overMaxCount{}
	counted := 0
	for _, rv := range svc.revs {
		if rv.State().Liveness {
			n := rv.UnhealthyOverMax()
			out[rv] = overMaxCount{unhealthy: n}
			counted += n
		}
	}
	if len(svc.old) == 0 {
		return out
	}
	limit := svc.latest.State().MaxInstances
	total := -counted
	counts := map[*rev]int{}
	for _, rv := range append(append([]*rev{}, svc.revs...), svc.old...) {
		counts[rv] = rv.State().Instances
		total += counts[rv]
	}
	over := max(0, total-limit)
	for _, rv := range svc.old {
		n := min(over, counts[rv])
		out[rv] = overMaxCount{revisionChange: n}
		over -= n
	}
	return out
}

// overMaxCollector exports tollgate_pool_instances_over_max, computed
// from the pool's revisions at each scrape.
type overMaxCollector struct {
	p    *Pool
	desc *prometheus.Desc
}

func newOverMaxCollector(p *Pool) *overMaxCollector {
	return &overMaxCollector{p: p, desc: prometheus.NewDesc("tollgate_pool_instances_over_max",
		"Instances of a service beyond its max instances, by the revision they belong to and why: a replaced revision's instances finishing their requests (revision_change), or unhealthy instances finishing theirs beside their replacements (unhealthy, for every revision with a liveness check), each for at most the request timeout and 15 minutes.",
		[]string{"service", "revision", "reason"}, nil)}
}

// Describe sends the gauge's description.
func (c *overMaxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect sends one sample per retired revision still draining, and one
// per running revision with a liveness check.
func (c *overMaxCollector) Collect(ch chan<- prometheus.Metric) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	for name, svc := range c.p.services {
		for rv, n := range svc.overMax() {
			if slices.Contains(svc.old, rv) {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.revisionChange), name, rv.Name(), overMaxReasonRevision)
			} else {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.unhealthy), name, rv.Name(), revision.OverMaxReasonUnhealthy)
			}
		}
	}
}
