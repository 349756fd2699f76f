package autoscale

// This file is the engine's decider: the service and instance windows fed
// by Observe, the metrics the policy reads, the bounds applied to its
// recommendation and the choice of surplus instances to stop.

import (
	"fmt"
	"math"
	"time"
)

// Window spans, in seconds.
const (
	span6s  = 6
	span1m  = 60
	span10m = 600
)

// maxSampleSkew is how far, in seconds, a sample may be from the engine's
// current second before Observe rejects it as invalid rather than merely
// stale: 100 years, far enough for any real gap.
const maxSampleSkew = 100 * 365 * 24 * 3600

// Metrics returns what the policy would see at now: service-wide window
// averages and instance counts. It is not a read-only getter: like every
// Engine method it moves the engine's clock to now (if later) and slides
// the service windows to now's second, so a sample later passed to Observe
// for a second more than 10 minutes before now is stale. Tick calls it.
// The averages end at the last complete second (see metricEnd).
func (e *Engine) Metrics(now time.Time) Metrics {
	now = e.clock(now)
	sec := e.metricEnd()
	m := Metrics{
		Now:     now,
		Current: e.rec.Count,
		Ready:   len(e.ready),
		Live:    len(e.ready) + len(e.starting),
		Active:  e.inFlight + e.nPending,
	}
	_, m.Concurrency6s = e.svc.average(0, sec)
	m.CPU1m, m.Concurrency1m = e.svc.average(1, sec)
	m.CPU10m, m.Concurrency10m = e.svc.average(2, sec)
	m.ACTCapacity = float64(e.cfg.MaxConcurrency)
	if len(e.ready) > 0 {
		m.ACTCapacity = float64(e.actSum) / float64(len(e.ready))
	}
	return m
}

// metricEnd is the last second the averages count: the current second
// once a sample for it is in (a caller that observes and ticks at the same
// time has closed it), else the one before, the last complete second. A
// Tick that runs on a current second nothing has been observed for yet (the
// pool and the simulator observe the second that just ended, then tick)
// would otherwise read that empty second as idle: the 1-minute average
// 59/60 of the truth, the 6-second one 5/6.
func (e *Engine) metricEnd() int64 {
	if e.sampled && e.sampledSec >= e.nowSec {
		return e.nowSec
	}
	return e.nowSec - 1
}

// NewDeployment resets every instance's ACT value to the configured
// maximum concurrency: ACT values belong to one deployment.
func (e *Engine) NewDeployment() {
	for _, in := range e.instances {
		in.act = e.cfg.MaxConcurrency
		in.actSeen = false
	}
	e.actSum = len(e.ready) * e.cfg.MaxConcurrency
}

// Observe records instance id's usage during the engine second containing
// now: cpuCores of CPU used and concurrency concurrent requests (its average
// over that second). A second sample for the same second replaces the
// first. Engine seconds are whole seconds since the engine's first call,
// measured with now.Sub, that is on the monotonic clock when both times
// carry a reading (as time.Now's do): a step of the wall clock neither
// makes samples stale nor moves them between seconds. A sample a whole
// 10-minute window older than the engine's current second is rejected with
// ErrStaleSample. The sample also drives adaptive concurrency throttling, once per
// second: CPU utilisation (cpuCores / CPUs per instance) above ACTHighCPU
// lowers the instance's ACT value by 1 (not below 1); under ACTLowCPU with
// the instance at its limit (concurrency or requests in flight at least its
// ACT value) raises it by 1 (not above MaxConcurrency).
func (e *Engine) Observe(now time.Time, id InstanceID, cpuCores, concurrency float64) error {
	in, ok := e.instances[id]
	if !ok {
		return fmt.Errorf("observe instance %d: %w", id, ErrUnknownInstance)
	}
	sec := e.second(now)
	if err := e.checkSample(id, now, cpuCores, concurrency); err != nil {
		return err
	}
	e.clock(now)
	if !e.acceptsSecond(in, sec) {
		return fmt.Errorf("observe instance %d at %v: %w", id, now, ErrStaleSample)
	}
	if in.win == nil {
		in.win = e.takeWindow()
	}
	v := pair{cpu: int64(math.Round(cpuCores * milli)), conc: int64(math.Round(concurrency * milli))}
	delta, _ := in.win.put(sec, v, true)
	e.svc.put(sec, delta, false)
	e.markSampled(sec)
	e.throttle(in, sec, cpuCores, concurrency)
	return nil
}

// checkSample reports a sample of instance id at t that is not finite, is
// negative or implausibly large, or is more than 100 years from the
// engine's time, wrapping ErrInvalidSample.
func (e *Engine) checkSample(id InstanceID, t time.Time, cpuCores, concurrency float64) error {
	if d := e.second(t) - e.nowSec; d > maxSampleSkew || d < -maxSampleSkew {
		return fmt.Errorf("observe instance %d at %v: more than 100 years from the engine's time %v: %w", id, t, e.now, ErrInvalidSample)
	}
	for _, v := range [2]float64{cpuCores, concurrency} {
		if !(v >= 0 && v <= maxSample) {
			return fmt.Errorf("observe instance %d: value %v not in [0, %g]: %w", id, v, float64(maxSample), ErrInvalidSample)
		}
	}
	return nil
}

// acceptsSecond reports whether a sample of instance in for second sec is
// recorded: both windows end at or before the engine's current second, so
// a second inside the 10 minutes ending there is one both accept; the
// service window is checked as well, so that the two never disagree.
func (e *Engine) acceptsSecond(in *instance, sec int64) bool {
	return e.nowSec-sec < span10m && e.svc.accepts(sec) && (in.win == nil || in.win.accepts(sec))
}

// markSampled notes that usage of second sec is in (see metricEnd).
func (e *Engine) markSampled(sec int64) {
	if !e.sampled || sec > e.sampledSec {
		e.sampled, e.sampledSec = true, sec
	}
}

// throttle applies adaptive concurrency throttling to instance in for a
// sample of second sec, once per second (see Observe).
func (e *Engine) throttle(in *instance, sec int64, cpuCores, concurrency float64) {
	if in.actSeen && sec <= in.actSec {
		return
	}
	in.actSeen, in.actSec = true, sec
	old := in.act
	util := cpuCores / e.cfg.CPUsPerInstance
	switch {
	case util > ACTHighCPU:
		in.act = max(in.act-1, 1)
	case util < ACTLowCPU && (concurrency >= float64(in.act) || in.inFlight >= in.act):
		in.act = min(in.act+1, e.cfg.MaxConcurrency)
	}
	if in.state == Ready {
		e.actSum += in.act - old
	}
}

// takeWindow returns a window for an instance: its first span is the
// surplus window, its last ten minutes. A freed window of another surplus
// window (from before a SetConfig) is dropped.
func (e *Engine) takeWindow() *window {
	surplus := int64(e.cfg.SurplusWindow / time.Second)
	for n := len(e.freeWindows); n > 0; n-- {
		w := e.freeWindows[n-1]
		e.freeWindows = e.freeWindows[:n-1]
		if w.spans[0] == surplus {
			return w
		}
	}
	return newWindow(surplus, span10m)
}

// bound applies the engine's rules to a policy's recommendation. Zero is
// decided by requests only: no instance live and none asked for, or no
// request for the idle timeout. Until then a live instance stays
// recommended whatever the metrics read (an idle instance's own background
// CPU must not make the count flap between 0 and 1). It reports whether
// the idle timeout set the count, and whether instances that exited on
// their own since the last Tick left none live.
func (e *Engine) bound(rec Recommendation, m Metrics) (_ Recommendation, idle, exited bool) {
	switch {
	case m.Active == 0 && m.Live > 0 && m.Now.Sub(e.lastRequest) >= e.cfg.IdleTimeout:
		rec.Count, idle = 0, true
	case m.Active == 0 && m.Live == 0:
		rec.Count, exited = 0, e.exited > 0
	default:
		rec.Count = max(rec.Count, 1)
	}
	rec.Count = min(max(rec.Count, e.cfg.MinInstances), e.cfg.MaxInstances)
	return rec, idle, exited
}

// scaleDown stops or drains surplus instances, newest (lowest ranked)
// first.
func (e *Engine) scaleDown(now time.Time) {
	r := min(e.rec.Count, len(e.ready))
	if r == len(e.ready) {
		return
	}
	sec := e.metricEnd()
	// Surplus instances ranked below protect are stopped only for the
	// idle timeout, not for low utilisation: all of them while a request
	// is pending, else those the recent demand needs.
	protect := r
	if !e.cfg.LiteralSurplusStop {
		if e.nPending > 0 {
			protect = len(e.ready)
		} else {
			protect = max(r, min(e.recentNeed(sec), len(e.ready)))
		}
	}
	live := len(e.starting) + len(e.ready)
	// The last instance stays while a request runs or waits, and until
	// the service has had no request for the idle timeout: scale to zero
	// counts from the last request, however short, not from what the
	// metric windows read.
	keepLast := e.inFlight+e.nPending > 0 || now.Sub(e.lastRequest) < e.cfg.IdleTimeout
	removed := false
	for i := len(e.ready) - 1; i >= r; i-- {
		in := e.ready[i]
		if live-1 < e.cfg.MinInstances || (live == 1 && keepLast) {
			break
		}
		if in.queued > 0 {
			continue
		}
		if idle := in.inFlight == 0 && now.Sub(in.lastActive) >= e.cfg.IdleTimeout; !idle &&
			(i < protect || !e.underused(in, now, sec)) {
			continue
		}
		live--
		removed = true
		e.actSum -= in.act
		if in.inFlight > 0 {
			in.state = Draining
			e.draining++
			e.ev.Draining = append(e.ev.Draining, in.id)
			continue
		}
		e.remove(in)
		e.ev.Stopped = append(e.ev.Stopped, in.id)
	}
	if removed {
		kept := e.ready[:0]
		for _, in := range e.ready {
			if in.state == Ready {
				kept = append(kept, in)
			}
		}
		clear(e.ready[len(kept):])
		e.ready = kept
	}
}

// recentNeed is the number of instances the last seconds' demand needs at
// the targets: the service's CPU and concurrency averaged over the 6
// seconds ending at second sec, the last complete one (the span of Knative's panic window), the
// concurrency raised to the requests in flight now when more, against the
// ready instances' mean ACT value (the configured maximum when none is
// ready).
func (e *Engine) recentNeed(sec int64) int {
	cpu, conc := e.svc.average(0, sec)
	conc = max(conc, float64(e.inFlight))
	capacity := float64(e.cfg.MaxConcurrency)
	if len(e.ready) > 0 {
		capacity = float64(e.actSum) / float64(len(e.ready))
	}
	return ceilInstances(max(cpu/e.cfg.CPUsPerInstance/e.cfg.CPUTarget, conc/capacity/e.cfg.ConcurrencyTarget))
}

// underused reports whether surplus instance in has been ready for the
// surplus window and used less than SurplusUtilisation over it (the
// larger of its CPU and concurrency utilisation).
func (e *Engine) underused(in *instance, now time.Time, sec int64) bool {
	if now.Sub(in.readyAt) < e.cfg.SurplusWindow {
		return false
	}
	var cpu, conc float64
	if in.win != nil {
		cpu, conc = in.win.average(0, sec)
	}
	util := max(cpu/e.cfg.CPUsPerInstance, conc/float64(e.cfg.MaxConcurrency))
	return util < SurplusUtilisation
}

// History is the service-wide usage of an engine's last complete seconds,
// for a new revision's engine to start from (Seed).
type History struct {
	secs []pair // oldest first; the last is the engine's last complete second
}

// History returns the service-wide per-second usage of the 10 minutes
// ending at the last complete second at now (moving the engine's clock to
// now, as every method does).
func (e *Engine) History(now time.Time) History {
	e.clock(now)
	end := e.metricEnd()
	w := e.svc
	if !w.started || end < w.first {
		return History{}
	}
	w.advance(end)
	from := max(w.first, end-span10m+1, w.last-span10m+1)
	h := History{secs: make([]pair, 0, end-from+1)}
	for s := from; s <= end; s++ {
		h.secs = append(h.secs, w.buf[w.slot(s)])
	}
	return h
}

// Seed adds h to the engine's service-wide windows, its last second as the
// engine's last complete second at now: a new revision taking over a
// service's traffic decides from the load it takes over, not from empty
// windows (its count went 10 → 1 → 2 → 3 right after a rollout). Seconds
// h holds that the engine has already left behind are skipped.
func (e *Engine) Seed(now time.Time, h History) {
	e.clock(now)
	end := e.metricEnd()
	for i, v := range h.secs {
		sec := end - int64(len(h.secs)-1-i)
		if e.nowSec-sec >= span10m || !e.svc.accepts(sec) {
			continue
		}
		e.svc.put(sec, v, false)
	}
}
