package revision

import (
	"errors"
	"math"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/runner"
)

// sample is one instance's measurement of the last second, taken with
// rv.mu held except for the CPU read.
type sample struct {
	in   *instance
	run  runner.Instance
	conc float64
	from time.Time // start of the measured span
}

// allocation is run's own CPU allocation (see CPUAllocator), or 0.
func allocation(run runner.Instance) float64 {
	if a, ok := run.(runner.CPUAllocator); ok {
		if c, ok := a.CPUs(); ok && c > 0 && !math.IsInf(c, 0) {
			return c
		}
	}
	return 0
}

// engineCPU is an instance's CPU usage (cores) as the engine is given it.
// The engine divides by the service's CPUsPerInstance (perInstance), so
// the usage of an instance with an allocation of its own (alloc > 0: a
// pod's CPU limits) is scaled to make its utilisation usage / alloc.
func engineCPU(cores, perInstance, alloc float64) float64 {
	if alloc <= 0 {
		return cores
	}
	return cores * perInstance / alloc
}

// tick measures every serving instance over the last second, feeds the
// engine, makes its decision and acts on it. It is the only caller of
// Engine.ObserveSpan and Engine.Tick, and reads the CPU without the lock.
func (rv *Revision) tick(now time.Time) {
	rv.mu.Lock()
	samples := make([]sample, 0, len(rv.insts))
	for id, in := range rv.insts {
		info, ok := rv.eng.Instance(id)
		if !ok || (info.State != autoscale.Ready && info.State != autoscale.Draining) || in.run == nil {
			continue
		}
		from := in.periodStart
		samples = append(samples, sample{in: in, run: in.run, conc: in.concurrency(now), from: from})
	}
	rv.mu.Unlock()

	cpus := make([]float64, len(samples))
	cpuTimes := make([]time.Duration, len(samples))
	cpuOK := make([]bool, len(samples))
	allocs := make([]float64, len(samples))
	for i, s := range samples {
		cpuTimes[i], cpuOK[i] = s.run.CPUTime()
		allocs[i] = allocation(s.run)
	}

	rv.mu.Lock()
	for i, s := range samples {
		in := s.in
		if cpuOK[i] && in.cpuOK {
			if span := now.Sub(in.cpuAt); span > 0 && cpuTimes[i] >= in.cpuLast {
				cpus[i] = float64(cpuTimes[i]-in.cpuLast) / float64(span)
			}
		}
		in.cpuLast, in.cpuOK, in.cpuAt = cpuTimes[i], cpuOK[i], now
		in.conc, in.cpu = s.conc, cpus[i]
		// The sample covers [from, now), more or less than a second when
		// the ticker runs late: the engine splits it over the seconds it
		// covers by time (one second per sample read a constant
		// concurrency of 6 as 4.7 to 5.2 with ticks up to 0.9 s late).
		if err := rv.eng.ObserveSpan(s.from, now, in.id, engineCPU(cpus[i], rv.eng.Config().CPUsPerInstance, allocs[i]), s.conc); err != nil && !errors.Is(err, autoscale.ErrUnknownInstance) && !errors.Is(err, autoscale.ErrStaleSample) {
			rv.log.Warn("engine refused a sample", "instance", in.name, "error", err)
		}
		rv.m.observe(in.name, s.conc, cpus[i])
	}
	if rv.failures > 0 {
		for _, in := range rv.insts {
			if !in.readyAt.IsZero() && !in.unhealthy && now.Sub(in.readyAt) >= backoffReset {
				rv.failures = 0
				rv.m.backoff.Set(0)
				break
			}
		}
	}
	rv.reshare()
	before := rv.lastRec
	dec := rv.eng.Tick(now)
	rv.lastRec = dec.Recommendation
	var scaled []any // the scale log line's attributes, logged once unlocked
	if dec.Count != before.Count {
		m := rv.eng.Metrics(now)
		cpu, conc, act := needs(rv.eng.Config(), m)
		decidedOn := "this replica's load"
		if bp, ok := rv.eng.Config().Policy.(runner.BasisPolicy); ok {
			// Several replicas: the count is the service's, decided on
			// every replica's load; the needs shown are those, not what
			// this replica's load asks of its share of each instance.
			if b := bp.Basis(); b.Service {
				cpu, conc, act, decidedOn = b.NeedCPU, b.NeedConcurrency, b.NeedACT, "every replica's load"
				m.Active = b.InFlight
			}
		}
		// The driver's own count before the engine's bounds (min and max
		// instances, one while requests wait, zero once idle).
		policy := int(math.Ceil(max(cpu, conc, act) - 1e-9))
		if dec.Held {
			policy = before.Count
		}
		reason := scaleReason(rv.eng.Config(), dec.Count, policy, dec.Idle, dec.Exited)
		if rv.replace > 0 && (reason == "min instances" || reason == "instance exited") && dec.Count > rv.cfg.MinInstances {
			reason = "unhealthy instance replaced"
		}
		scaled = []any{"from", before.Count, "to", dec.Count, "reason", reason, "driver", dec.Driver.String(), "driver_count", policy,
			"cpu_1m", round3(m.CPU1m), "concurrency_1m", round3(m.Concurrency1m), "concurrency_10m", round3(m.Concurrency10m),
			"act_capacity", round3(m.ACTCapacity), "need_cpu", round3(cpu), "need_concurrency", round3(conc), "need_act", round3(act),
			"in_flight", m.Active, "ready", m.Ready, "live", m.Live, "decided_on", decidedOn}
		rv.noteScale(ScaleEvent{Time: now, From: before.Count, To: dec.Count, Driver: dec.Driver.String(), Reason: reason, DriverCount: policy,
			NeedCPU: round3(cpu), NeedConcurrency: round3(conc), NeedACT: round3(act), InFlight: m.Active, Ready: m.Ready,
			DecidedOn: decidedOn})
	}
	rv.apply(now, dec.Events)
	rv.replaced()
	st := rv.eng.Stats()
	rv.mu.Unlock()
	// Logging is I/O: never with rv.mu held, which every request takes.
	if scaled != nil {
		rv.log.Info("scale", scaled...)
	}
	rv.m.decision(dec.Recommendation, st)
}

// scaleReason says in a word or two why the count became to when the
// winning driver asked for policy: the metrics themselves, or a bound the
// engine applies on top of them. idle and exited are the decision's Idle
// and Exited: the idle timeout, or the last live instances exiting on
// their own with no request in flight or pending, set the count.
func scaleReason(cfg autoscale.Config, to, policy int, idle, exited bool) string {
	switch {
	case exited:
		return "instance exited" // crashed or failed to start; only a request starts one now
	case idle || to == 0:
		return "idle timeout" // no request for Config.IdleTimeout
	case to == policy:
		return "metrics"
	case to == cfg.MaxInstances && to < policy:
		return "max instances"
	case to == cfg.MinInstances && to > policy:
		return "min instances"
	case to > policy:
		return "requests waiting" // on demand: the only driver from zero
	default:
		return "bounds"
	}
}

// needs are the instance counts each driver asks for, before rounding and
// bounds, computed as the Cloud Run recommender does.
func needs(cfg autoscale.Config, m autoscale.Metrics) (cpu, conc, act float64) {
	return autoscale.NewCloudRun(cfg).Needs(m)
}

func round3(v float64) float64 {
	const k = 1000
	return float64(int64(v*k+0.5)) / k
}
