package kube

// This file is what several replicas decide together (Options.Election):
// each replica reports the load its engine measured (the window averages
// of the requests it proxied), the leader sums the fresh reports and runs
// one Cloud Run decision on the service's total, with the whole maximum
// concurrency of a pod, as Knative's autoscaler decides from every
// activator's stats. Every replica's engine then starts instances toward
// that count (runner.LoadSharer's policy). Each pod's capacity is split
// among the replicas for routing only, by their load, by the leader
// (assign.go): a replica carrying all the traffic may fill the pods, one
// carrying none keeps one slot.

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// maxLoadValue bounds every figure of a report's load: a report is
// another process's JSON, and a sum of a few of them must stay finite.
const maxLoadValue = 1e6

// replicaLoad is one replica's measured load, as its engines' metrics read it,
// in its report.
type replicaLoad struct {
	// Conc6s, Conc1m and Conc10m are the requests this replica had in
	// flight on instances, averaged per second over 6 s, 1 min and
	// 10 min.
	Conc6s  float64 `json:"c6"`
	Conc1m  float64 `json:"c60"`
	Conc10m float64 `json:"c600"`
	// CPU1m and CPU10m are the cores used by the pods this replica's
	// instances hold, per second over 1 and 10 min. Every replica holding
	// a pod measures its whole CPU, so these are not summed.
	CPU1m  float64 `json:"cpu60,omitempty"`
	CPU10m float64 `json:"cpu600,omitempty"`
	// ACT is the ready instances' mean ACT value as a fraction of this
	// replica's share of a pod: 1 when adaptive concurrency throttling
	// has not lowered it.
	ACT float64 `json:"act"`
	// Active is the requests in flight or pending now.
	Active int `json:"active"`
	// Ready is the ready instances.
	Ready int `json:"ready"`
}

// decision is the leader's count from the service's total load, in its
// report: every replica's engine starts instances toward it.
type decision struct {
	Count  int              `json:"count"`
	Driver autoscale.Driver `json:"driver"`
	Held   bool             `json:"held,omitempty"`
	// The drivers' needs and the requests in flight the count was
	// decided on, every replica's: the followers' scale logs show them.
	// Absent from a leader of an earlier release.
	NeedCPU         float64 `json:"need_cpu,omitempty"`
	NeedConcurrency float64 `json:"need_concurrency,omitempty"`
	NeedACT         float64 `json:"need_act,omitempty"`
	InFlight        int     `json:"in_flight,omitempty"`
}

// clean returns d with its count in [0, autoscale.MaxInstancesLimit] and
// its needs finite and in [0, maxLoadValue]: a leader's decision read
// from its report is not trusted to be either.
func (d decision) clean() decision {
	c := func(v float64) float64 {
		if !(v >= 0) { // NaN too
			return 0
		}
		return min(v, maxLoadValue)
	}
	d.Count = min(max(d.Count, 0), autoscale.MaxInstancesLimit)
	d.NeedCPU, d.NeedConcurrency, d.NeedACT = c(d.NeedCPU), c(d.NeedConcurrency), c(d.NeedACT)
	d.InFlight = min(max(d.InFlight, 0), maxLoadValue)
	return d
}

// clean returns l with every figure finite and in [0, maxLoadValue], ACT
// in (0, 1]: a report read from the Lease is not trusted to be either.
func (l replicaLoad) clean() replicaLoad {
	c := func(v float64) float64 {
		if !(v >= 0) { // NaN too
			return 0
		}
		return min(v, maxLoadValue)
	}
	l.Conc6s, l.Conc1m, l.Conc10m = c(l.Conc6s), c(l.Conc1m), c(l.Conc10m)
	l.CPU1m, l.CPU10m = c(l.CPU1m), c(l.CPU10m)
	if !(l.ACT > 0) || l.ACT > 1 {
		l.ACT = 1
	}
	l.Active = min(max(l.Active, 0), maxLoadValue)
	l.Ready = min(max(l.Ready, 0), autoscale.MaxInstancesLimit)
	return l
}

// weight is how much of a pod's capacity l's replica needs, relative to
// the others: its last 6 seconds' concurrency, or the requests it has now
// when more (a burst not yet averaged in, or requests waiting).
func (l replicaLoad) weight() float64 { return max(l.Conc6s, float64(l.Active)) }

// loadOf is the load one engine's metrics read, its ACT as a fraction of
// share (the engine's MaxConcurrency), rounded to thousandths so that a
// report does not change for noise.
func loadOf(m autoscale.Metrics, share int) replicaLoad {
	act := 1.0
	if share > 0 && m.Ready > 0 {
		act = m.ACTCapacity / float64(share)
	}
	return replicaLoad{
		Conc6s: round3(m.Concurrency6s), Conc1m: round3(m.Concurrency1m), Conc10m: round3(m.Concurrency10m),
		CPU1m: round3(m.CPU1m), CPU10m: round3(m.CPU10m),
		ACT: round3(act), Active: m.Active, Ready: m.Ready,
	}.clean()
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// merge is the load of several engines or replicas together:
// concurrency, requests and ready instances summed; CPU the largest (each
// holder of a pod measures its whole CPU, and every replica binds the
// lowest free pod names first, so the largest holder's pods cover the
// others'); ACT the mean weighted by each one's 1-minute concurrency (the
// ACT driver's numerator), or plain where none has any.
func merge(loads []replicaLoad) replicaLoad {
	var t replicaLoad
	var actW, w, actPlain float64
	for _, l := range loads {
		l = l.clean()
		t.Conc6s += l.Conc6s
		t.Conc1m += l.Conc1m
		t.Conc10m += l.Conc10m
		t.CPU1m = max(t.CPU1m, l.CPU1m)
		t.CPU10m = max(t.CPU10m, l.CPU10m)
		t.Active += l.Active
		t.Ready += l.Ready
		actW += l.ACT * l.Conc1m
		w += l.Conc1m
		actPlain += l.ACT
	}
	switch {
	case w > 0:
		t.ACT = actW / w
	case len(loads) > 0:
		t.ACT = actPlain / float64(len(loads))
	}
	return t.clean()
}

// reported is a replica's load as the leader last read it, and when (on
// the leader's clock).
type reported struct {
	load replicaLoad
	seen time.Time
}

// totalDecider is the leader's decision on the service's total load: the
// Cloud Run recommender on the sum of the fresh reports, with the whole
// maximum concurrency of a pod. It keeps the count it last decided (the
// recommender holds a count within tolerance of the need) and is pure:
// the time is an argument.
type totalDecider struct {
	current int
}

// decide sums the loads seen within fresh before now and returns the
// count for the service, bounded by cfg's min and max instances and at
// least 1 while a request is in flight or pending anywhere, with the
// metrics it decided on.
func (d *totalDecider) decide(now time.Time, cfg autoscale.Config, loads []reported, fresh time.Duration) (autoscale.Recommendation, autoscale.Metrics) {
	cfg = cfg.WithDefaults()
	var in []replicaLoad
	for _, l := range loads {
		if now.Sub(l.seen) < fresh {
			in = append(in, l.load)
		}
	}
	t := merge(in)
	act := t.ACT
	if act == 0 {
		act = 1
	}
	m := autoscale.Metrics{
		Now: now, Current: d.current, Ready: t.Ready, Live: t.Ready, Active: t.Active,
		CPU1m: t.CPU1m, CPU10m: t.CPU10m,
		Concurrency6s: t.Conc6s, Concurrency1m: t.Conc1m, Concurrency10m: t.Conc10m,
		ACTCapacity: act * float64(cfg.MaxConcurrency),
	}
	rec := autoscale.NewCloudRun(cfg).Recommend(m)
	if t.Active > 0 {
		rec.Count = max(rec.Count, 1)
	}
	rec.Count = min(max(rec.Count, cfg.MinInstances), cfg.MaxInstances)
	d.current = rec.Count
	return rec, m
}
