package pool

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxOverMaxGrace bounds how long a replaced revision's instances may
// keep running beyond the service's max instances while they finish
// their requests in flight: 15 minutes, as Cloud Run's grace for
// instances over max.
const MaxOverMaxGrace = 15 * time.Minute

// overMaxReasonRevision labels instances over max that belong to a
// revision replaced by a traffic change or a new revision.
const overMaxReasonRevision = "revision_change"

// drainBound is when a revision retired at now stops its instances even
// if busy: its requests end within the request timeout (and the moment
// its 504 takes), so the drain is bounded by that, by the pool's drain
// timeout and by MaxOverMaxGrace.
func (p *Pool) drainBound(rv *revision, now time.Time) time.Time {
	rv.mu.Lock()
	rt := rv.lim.requestTimeout + requestTimeoutGrace
	rv.mu.Unlock()
	return now.Add(min(p.drainTimeout, rt, MaxOverMaxGrace))
}

// instanceCount is the number of instances the revision runs, those
// stopping included.
func (rv *revision) instanceCount() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.insts)
}

// overMax is, for each retired revision of svc still draining, how many
// of its instances are beyond the service's max instances (the latest
// revision's): the instances of every revision, less that max, counted
// against the retired revisions, oldest first; p.mu is held.
func (svc *service) overMax() map[*revision]int {
	svc.pruneOld()
	if len(svc.old) == 0 {
		return nil
	}
	svc.latest.mu.Lock()
	limit := maxInstances(svc.latest.cfg)
	svc.latest.mu.Unlock()
	total := 0
	counts := map[*revision]int{}
	for _, rv := range append(append([]*revision{}, svc.revs...), svc.old...) {
		counts[rv] = rv.instanceCount()
		total += counts[rv]
	}
	over := max(0, total-limit)
	out := map[*revision]int{}
	for _, rv := range svc.old {
		n := min(over, counts[rv])
		out[rv] = n
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
		"Instances of a service beyond its max instances, by the revision they belong to and why: a replaced revision's instances finishing their requests (revision_change), for at most the request timeout and 15 minutes.",
		[]string{"service", "revision", "reason"}, nil)}
}

// Describe sends the gauge's description.
func (c *overMaxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect sends one sample per retired revision still draining.
func (c *overMaxCollector) Collect(ch chan<- prometheus.Metric) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	for name, svc := range c.p.services {
		for rv, n := range svc.overMax() {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), name, rv.name, overMaxReasonRevision)
		}
	}
}
