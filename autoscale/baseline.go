package autoscale

import (
	"math"
	"time"
)

// Published parameters of the Knative Pod Autoscaler (KPA) defaults.
const (
	// KPAStableWindow is the span of the average concurrency the stable
	// need is computed from, and how long the panic condition must be
	// absent before panic mode ends.
	KPAStableWindow = 60 * time.Second

	// KPAPanicWindow is the span of the average concurrency the panic need
	// is computed from.
	KPAPanicWindow = 6 * time.Second

	// KPATargetUtilisation is the fraction of the maximum concurrency per
	// instance the KPA aims for.
	KPATargetUtilisation = 0.70

	// KPAPanicThreshold is the ratio of panic need to ready instances at
	// or above which the KPA enters panic mode.
	KPAPanicThreshold = 2.0

	// KPAMaxScaleUpRate caps one decision's count at this many times the
	// ready instances (rounded up).
	KPAMaxScaleUpRate = 1000.0

	// KPAMaxScaleDownRate keeps one decision's count at least the ready
	// instances divided by this rate (rounded down): at most halving per
	// KPATickInterval.
	KPAMaxScaleDownRate = 2.0

	// KPATickInterval is how often the KPA decides; between decisions it
	// repeats its last answer.
	KPATickInterval = 2 * time.Second

	// KPAScaleToZeroGrace is how long a drop to zero instances is held at
	// one instance.
	KPAScaleToZeroGrace = 30 * time.Second
)

// KnativeKPA is a policy modelled on the published behaviour of Knative's
// Pod Autoscaler in concurrency mode. Every KPATickInterval it computes a
// stable need from the 60-second average concurrency and a panic need from
// the 6-second average, each divided by MaxConcurrency × 70 % and rounded
// up, then bounded to [floor(ready / 2), ceil(ready × 1000)]. It enters
// panic mode when the panic need is at least twice the ready instances and
// leaves it after a whole stable window without that; while panicking it
// follows the panic need and never scales down. A drop to zero is held at
// one instance for KPAScaleToZeroGrace. Between ticks it repeats its last
// answer.
type KnativeKPA struct {
	target float64 // concurrency per instance aimed for

	evaluated   bool
	lastEval    time.Time
	last        Recommendation
	panicking   bool
	panicSeen   time.Time // last time the panic condition held
	panicCount  int       // highest count recommended during this panic
	zeroPending bool
	zeroSince   time.Time
}

// NewKnativeKPA returns a KPA-like policy for cfg (defaults applied): the
// per-instance concurrency target is cfg.MaxConcurrency × 70 %.
func NewKnativeKPA(cfg Config) *KnativeKPA {
	cfg = cfg.withDefaults()
	return &KnativeKPA{target: float64(cfg.MaxConcurrency) * KPATargetUtilisation}
}

// Recommend implements Policy.
func (p *KnativeKPA) Recommend(m Metrics) Recommendation {
	if p.evaluated && m.Now.Sub(p.lastEval) < KPATickInterval {
		return p.last
	}
	p.evaluated, p.lastEval = true, m.Now

	ready := float64(max(m.Ready, 1))
	maxUp := math.Ceil(KPAMaxScaleUpRate * ready)
	maxDown := math.Floor(ready / KPAMaxScaleDownRate)
	bound := func(n float64) int {
		return int(math.Min(math.Max(n, maxDown), maxUp))
	}
	stable := bound(float64(ceilInstances(m.Concurrency1m / p.target)))
	panicNeed := bound(float64(ceilInstances(m.Concurrency6s / p.target)))

	if float64(panicNeed)/ready >= KPAPanicThreshold {
		if !p.panicking {
			p.panicking, p.panicCount = true, 0
		}
		p.panicSeen = m.Now
	} else if p.panicking && m.Now.Sub(p.panicSeen) >= KPAStableWindow {
		p.panicking = false
	}

	count := stable
	if p.panicking {
		count = max(stable, panicNeed, p.panicCount, m.Current)
		p.panicCount = count
	}

	if count == 0 && m.Current > 0 {
		if !p.zeroPending {
			p.zeroPending, p.zeroSince = true, m.Now
		}
		if m.Now.Sub(p.zeroSince) < KPAScaleToZeroGrace {
			count = 1
		}
	} else if count > 0 {
		p.zeroPending = false
	}

	driver := DriverConcurrency
	if count == 0 {
		driver = DriverNone
	}
	p.last = Recommendation{Count: count, Driver: driver, Panic: p.panicking}
	return p.last
}

// Published parameters of the Kubernetes Horizontal Pod Autoscaler (HPA)
// defaults.
const (
	// HPATolerance is the relative distance of utilisation from its target
	// within which the HPA keeps the current count.
	HPATolerance = 0.1

	// HPASyncPeriod is how often the HPA decides; between decisions it
	// repeats its last answer.
	HPASyncPeriod = 15 * time.Second

	// HPAScaleDownStabilisation is the span over which a scale-down takes
	// the highest recent recommendation.
	HPAScaleDownStabilisation = 300 * time.Second

	// HPAScaleUpPeriod is the period over which scale-up is limited to the
	// larger of HPAScaleUpPods and HPAScaleUpPercent.
	HPAScaleUpPeriod = 15 * time.Second

	// HPAScaleUpPods is the number of instances the HPA may always add per
	// HPAScaleUpPeriod.
	HPAScaleUpPods = 4

	// HPAScaleUpPercent is the growth, in percent of the current count, the
	// HPA may add per HPAScaleUpPeriod when that is more than
	// HPAScaleUpPods.
	HPAScaleUpPercent = 100
)

// hpaHistory is how many past recommendations the HPA-like policy keeps:
// enough for one per sync period over the stabilisation window, with room.
const hpaHistory = 64

// KubernetesHPA is a policy modelled on the published behaviour of the
// Kubernetes Horizontal Pod Autoscaler on CPU utilisation. Every
// HPASyncPeriod it computes ceil(current × utilisation / target), where
// current is the ready instance count and utilisation the 1-minute average
// CPU per ready instance over CPUs per instance, and keeps current while
// |utilisation/target − 1| ≤ 0.1. Scaling down takes the highest
// recommendation of the last 300 s (never more than current); scaling up is
// limited to max(+4 instances, +100 %) per 15 s. With no ready instance it
// recommends none: the HPA cannot scale from zero.
type KubernetesHPA struct {
	target float64 // CPU utilisation aimed for
	cpus   float64 // CPUs per instance

	evaluated bool
	lastEval  time.Time
	last      Recommendation
	recs      [hpaHistory]hpaEvent // recent raw recommendations (ring)
	ups       [hpaHistory]hpaEvent // recent scale-ups: time and instances added (ring)
	nrecs     int
	nups      int
}

type hpaEvent struct {
	at time.Time
	n  int
}

// NewKubernetesHPA returns an HPA-like policy for cfg (defaults applied),
// aiming at cfg.CPUTarget.
func NewKubernetesHPA(cfg Config) *KubernetesHPA {
	cfg = cfg.withDefaults()
	return &KubernetesHPA{target: cfg.CPUTarget, cpus: cfg.CPUsPerInstance}
}

// Recommend implements Policy.
func (p *KubernetesHPA) Recommend(m Metrics) Recommendation {
	if p.evaluated && m.Now.Sub(p.lastEval) < HPASyncPeriod {
		return p.last
	}
	p.evaluated, p.lastEval = true, m.Now

	current := m.Ready
	if current == 0 {
		p.last = Recommendation{Count: 0, Driver: DriverNone}
		return p.last
	}
	utilisation := m.CPU1m / p.cpus / float64(current)
	ratio := utilisation / p.target
	rec := Recommendation{Driver: DriverCPU}
	if math.Abs(ratio-1) <= HPATolerance+ceilEpsilon {
		rec.Count, rec.Held = current, true
	} else {
		rec.Count = ceilInstances(float64(current) * ratio)
	}
	p.recs[p.nrecs%hpaHistory] = hpaEvent{at: m.Now, n: rec.Count}
	p.nrecs++

	switch {
	case rec.Count < current:
		highest := rec.Count
		for i := 0; i < min(p.nrecs, hpaHistory); i++ {
			e := p.recs[i]
			if m.Now.Sub(e.at) < HPAScaleDownStabilisation && e.n > highest {
				highest = e.n
			}
		}
		rec.Count = min(highest, current)
	case rec.Count > current:
		added := 0
		for i := 0; i < min(p.nups, hpaHistory); i++ {
			e := p.ups[i]
			if m.Now.Sub(e.at) < HPAScaleUpPeriod {
				added += e.n
			}
		}
		start := max(current-added, 0)
		limit := max(start+HPAScaleUpPods, start+start*HPAScaleUpPercent/100)
		rec.Count = max(min(rec.Count, limit), current)
		if rec.Count > current {
			p.ups[p.nups%hpaHistory] = hpaEvent{at: m.Now, n: rec.Count - current}
			p.nups++
		}
	}
	if rec.Count == 0 {
		rec.Driver = DriverNone
	}
	p.last = rec
	return rec
}
