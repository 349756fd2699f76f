package autoscale

import (
	"math"
	"time"
)

// Driver names what set a recommendation.
type Driver uint8

// The drivers of a recommendation.
const (
	// DriverNone means no load: nothing asked for an instance.
	DriverNone Driver = iota
	// DriverCPU is the CPU utilisation driver.
	DriverCPU
	// DriverConcurrency is the request concurrency driver.
	DriverConcurrency
	// DriverACT is the adaptive concurrency throttling driver.
	DriverACT
)

// String returns the driver's name as Cloud Run's scaling_driver field
// spells it ("cpu", "concurrency", "act"), or "none".
func (d Driver) String() string {
	switch d {
	case DriverCPU:
		return "cpu"
	case DriverConcurrency:
		return "concurrency"
	case DriverACT:
		return "act"
	default:
		return "none"
	}
}

// Metrics is what a Policy sees at one decision. Usage figures are
// service-wide totals: the sum over instances of each second's samples,
// averaged over the span.
type Metrics struct {
	// Now is the time of the decision.
	Now time.Time

	// Current is the count the engine recommended at its previous decision.
	Current int

	// Ready is the number of instances serving traffic.
	Ready int

	// Live is Ready plus the instances still starting.
	Live int

	// Active is the number of requests in flight plus pending.
	Active int

	// CPU1m and CPU10m are the average CPU used per second, in cores,
	// over the past 1 and 10 minutes.
	CPU1m, CPU10m float64

	// Concurrency6s, Concurrency1m and Concurrency10m are the average
	// number of concurrent requests per second over the past 6 seconds,
	// 1 minute and 10 minutes.
	Concurrency6s, Concurrency1m, Concurrency10m float64

	// ACTCapacity is the mean current ACT value of the ready instances:
	// the concurrency one instance is taken to handle by the ACT driver.
	// It is the configured maximum concurrency when none is ready.
	ACTCapacity float64
}

// Recommendation is a policy's answer: how many instances the service
// should have, and why.
type Recommendation struct {
	// Count is the recommended number of instances, before the engine
	// applies min and max instances.
	Count int

	// Driver is the driver that asked for the most instances.
	Driver Driver

	// Held is true when utilisation was within tolerance of the target
	// and the count was kept rather than recomputed.
	Held bool

	// Panic is set only by KnativeKPA, true while it is in panic mode
	// (following the 6-second need and never scaling down). The CloudRun
	// and KubernetesHPA policies, which have no panic mode, leave it false.
	Panic bool
}

// Policy recommends an instance count from service metrics. The engine
// calls Recommend once per Tick, with Now never decreasing; a Policy may
// keep state between calls and must not be shared between engines.
type Policy interface {
	Recommend(m Metrics) Recommendation
}

// ceilEpsilon absorbs floating-point error before rounding up, so that
// needing exactly 4 instances (computed as 4.000000000000001) gives 4.
const ceilEpsilon = 1e-9

// ceilInstances rounds an instance need up to a whole count, capped so the
// conversion to int cannot overflow.
func ceilInstances(need float64) int {
	if !(need > ceilEpsilon) {
		return 0
	}
	if need > MaxInstancesLimit {
		return MaxInstancesLimit + 1
	}
	return int(math.Ceil(need - ceilEpsilon))
}

// CloudRun is Cloud Run's metric-based recommender (SPEC §3): the largest
// of the CPU, concurrency and ACT drivers, kept unchanged while utilisation
// is within Tolerance of the target.
type CloudRun struct {
	cfg Config
}

// NewCloudRun returns the Cloud Run recommender for cfg (defaults applied).
func NewCloudRun(cfg Config) *CloudRun {
	return &CloudRun{cfg: cfg.withDefaults()}
}

// Needs returns each driver's fractional instance need, before rounding:
//
//	cpu  = (CPU1m / CPUs per instance) / CPU target
//	conc = (max(Concurrency1m, Concurrency10m) / max concurrency) / concurrency target
//	act  = (Concurrency1m / ACTCapacity) / concurrency target
func (p *CloudRun) Needs(m Metrics) (cpu, conc, act float64) {
	c := p.cfg
	cpu = m.CPU1m / c.CPUsPerInstance / c.CPUTarget
	conc = math.Max(m.Concurrency1m, m.Concurrency10m) / float64(c.MaxConcurrency) / c.ConcurrencyTarget
	capacity := m.ACTCapacity
	if !(capacity >= 1) {
		capacity = float64(c.MaxConcurrency)
	}
	act = m.Concurrency1m / capacity / c.ConcurrencyTarget
	return cpu, conc, act
}

// Recommend returns the largest driver's need rounded up (4.1 → 5), or
// m.Current unchanged when the largest need is within Tolerance of it:
// need/Current in [0.9, 1.1] is utilisation in [54 %, 66 %] of a 60 %
// target. The count is recomputed from measured usage, never scaled from
// Current, so it can rise while utilisation is under target, and it falls
// only once utilisation is more than 10 % below target. Ties between
// drivers go to CPU, then concurrency, then ACT.
func (p *CloudRun) Recommend(m Metrics) Recommendation {
	cpu, conc, act := p.Needs(m)
	need, driver := cpu, DriverCPU
	if conc > need {
		need, driver = conc, DriverConcurrency
	}
	if act > need {
		need, driver = act, DriverACT
	}
	if !(need > ceilEpsilon) {
		return Recommendation{Count: 0, Driver: DriverNone}
	}
	if m.Current > 0 {
		r := need / float64(m.Current)
		if r >= 1-Tolerance-ceilEpsilon && r <= 1+Tolerance+ceilEpsilon {
			return Recommendation{Count: m.Current, Driver: driver, Held: true}
		}
	}
	return Recommendation{Count: ceilInstances(need), Driver: driver}
}
