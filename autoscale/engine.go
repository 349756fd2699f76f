package autoscale

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Errors returned by Engine methods; test for them with errors.Is.
var (
	// ErrUnknownInstance means the instance ID is not starting, ready or
	// draining (never started, or already stopped).
	ErrUnknownInstance = errors.New("autoscale: unknown instance")

	// ErrUnknownRequest means the request ID is not in flight or pending.
	ErrUnknownRequest = errors.New("autoscale: unknown request")

	// ErrInvalidSample means a metric sample is negative, not finite or
	// implausibly large, or its time is more than 100 years from the
	// engine's current time.
	ErrInvalidSample = errors.New("autoscale: invalid sample")

	// ErrStaleSample means a sample is for a second that has already left
	// the 10-minute window ending at the engine's current second; neither
	// the instance's nor the service's window records it.
	ErrStaleSample = errors.New("autoscale: sample older than the window")

	// ErrNotStarting means InstanceReady was called for an instance that
	// is not starting.
	ErrNotStarting = errors.New("autoscale: instance is not starting")
)

// Window spans, in seconds.
const (
	span6s  = 6
	span1m  = 60
	span10m = 600
)

// InstanceID identifies an instance; the engine assigns them from 1.
type InstanceID uint64

// RequestID identifies a request; the engine assigns them from 1.
type RequestID uint64

// InstanceState is where an instance is in its life.
type InstanceState uint8

// The states of an instance.
const (
	// Starting: the engine asked for it; it is not serving yet.
	Starting InstanceState = iota + 1
	// Ready: serving traffic.
	Ready
	// Draining: chosen for shutdown, finishing its requests in flight.
	Draining
	// Stopped: gone.
	Stopped
)

// String returns the state's lower-case name.
func (s InstanceState) String() string {
	switch s {
	case Starting:
		return "starting"
	case Ready:
		return "ready"
	case Draining:
		return "draining"
	case Stopped:
		return "stopped"
	default:
		return fmt.Sprintf("InstanceState(%d)", uint8(s))
	}
}

// Outcome is what Route did with a request.
type Outcome uint8

// The outcomes of Route.
const (
	// Served: the request runs on Instance now.
	Served Outcome = iota + 1
	// Queued: the request waits in the pending queue, expected to run on
	// Instance, until a slot frees, it is dispatched by a later call, or
	// Deadline passes.
	Queued
)

// String returns the outcome's lower-case name.
func (o Outcome) String() string {
	switch o {
	case Served:
		return "served"
	case Queued:
		return "queued"
	default:
		return fmt.Sprintf("Outcome(%d)", uint8(o))
	}
}

// RouteResult is the routing of one incoming request.
type RouteResult struct {
	// Request is the ID the engine gave the request; pass it to
	// RequestDone when it finishes (or is abandoned while pending).
	Request RequestID

	// Outcome says whether it runs now or waits.
	Outcome Outcome

	// Instance runs the request (Served) or is the one it is expected to
	// run on (Queued). It is zero only when queued with no instance at all.
	Instance InstanceID

	// Started is true when Instance was started on demand for this
	// request: the caller must start it and call InstanceReady.
	Started bool

	// Deadline is, for a queued request, when its wait ends: then a new
	// instance is started for it, or at max instances it fails with 429.
	Deadline time.Time
}

// Dispatch is a pending request given a slot.
type Dispatch struct {
	// Request is the pending request.
	Request RequestID
	// Instance now runs it.
	Instance InstanceID
}

// Events are the effects of one engine call that the caller must act on.
// The slices are owned by the engine and valid until its next call.
type Events struct {
	// Started are new instances to start; report each with InstanceReady.
	Started []InstanceID
	// Draining are instances that get no new requests and stop once their
	// requests in flight finish (reported in Stopped by a later call).
	Draining []InstanceID
	// Stopped are instances to shut down now: nothing runs on them.
	Stopped []InstanceID
	// Dispatched are pending requests that now run on an instance.
	Dispatched []Dispatch
	// Rejected are pending requests that waited too long at max
	// instances: answer them with HTTP 429.
	Rejected []RequestID
	// Failed are requests that were running on an instance that exited
	// on its own (InstanceExited), in ascending ID order: the engine has
	// forgotten them; answer them with HTTP 502.
	Failed []RequestID
}

func (ev *Events) reset() {
	ev.Started = ev.Started[:0]
	ev.Draining = ev.Draining[:0]
	ev.Stopped = ev.Stopped[:0]
	ev.Dispatched = ev.Dispatched[:0]
	ev.Rejected = ev.Rejected[:0]
	ev.Failed = ev.Failed[:0]
}

// Decision is the result of one Tick.
type Decision struct {
	// Recommendation is the policy's answer with the engine's bounds
	// applied: Count is in [min, max] instances, at least 1 while any
	// request is in flight or pending, and min when nothing can scale
	// from zero or the service has been idle for Config.IdleTimeout.
	Recommendation
	// Events are what the caller must do.
	Events
}

// Stats is a snapshot of the engine's counts.
type Stats struct {
	// Starting, Ready and Draining count instances in each state.
	Starting, Ready, Draining int
	// InFlight and Pending count requests running and waiting.
	InFlight, Pending int
	// Recommended is the count of the last Tick.
	Recommended int
}

// InstanceInfo describes one instance.
type InstanceInfo struct {
	// ID is the instance's ID.
	ID InstanceID
	// State is where it is in its life.
	State InstanceState
	// InFlight is the number of requests running on it.
	InFlight int
	// Queued is the number of pending requests expected to run on it.
	Queued int
	// ACT is its current adaptive concurrency limit.
	ACT int
	// ExpectedReady is when a starting instance is expected to be ready.
	ExpectedReady time.Time
	// Recommended is true for a ready instance ranked within the
	// recommended count; false for surplus.
	Recommended bool
}

type instance struct {
	id            InstanceID
	state         InstanceState
	startedAt     time.Time
	expectedReady time.Time
	readyAt       time.Time
	lastActive    time.Time // last request started or finished on it
	freeAt        time.Time // last time it had a free slot: lastActive, or when it became ready
	inFlight      int
	queued        int
	act           int
	actSec        int64
	actSeen       bool
	win           *window // nil until its first sample
	ahead         int     // requeue's count of pending requests kept on it
}

type request struct {
	inst     *instance // running on it, or pending and expected to
	pending  bool
	seq      uint64 // position in the pending queue while pending
	servedAt time.Time
}

type pendingEntry struct {
	id       RequestID
	deadline time.Time
	done     bool
}

// Engine is the autoscaler of one service revision. It is a pure state
// machine: it starts no goroutine, does no I/O and never reads the clock;
// every method takes the current time. It is not safe for concurrent use.
type Engine struct {
	cfg    Config
	policy Policy

	begun  bool
	epoch  time.Time // the time of the first call: second 0 of every window
	now    time.Time
	nowSec int64 // e.second(now)

	svc       *window // service-wide totals: spans 6 s, 1 min, 10 min
	instances map[InstanceID]*instance
	starting  []*instance // in start order
	ready     []*instance // in rank order: first ready ranks first
	draining  int
	actSum    int // sum of ACT over ready instances

	requests    map[RequestID]request
	pending     []pendingEntry
	pendingBase uint64 // seq of pending[0]
	pendingHead int
	nPending    int
	inFlight    int
	lastRequest time.Time // last time a request arrived or finished

	nextInstance InstanceID
	nextRequest  RequestID

	rec Recommendation // last Tick's, bounded

	coldStartMean float64 // mean observed cold start in ns
	coldStarts    int
	serviceMean   float64 // smoothed request time in ns; see observeService
	services      int     // requests averaged into serviceMean, at most serviceSmoothing

	freeWindows []*window
	ev          Events
}

// New returns an engine for cfg, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := cfg.Policy
	if p == nil {
		p = NewCloudRun(cfg)
	}
	return &Engine{
		cfg:       cfg,
		policy:    p,
		svc:       newWindow(span6s, span1m, span10m),
		instances: make(map[InstanceID]*instance),
		requests:  make(map[RequestID]request),
		rec:       Recommendation{Count: cfg.MinInstances},
	}, nil
}

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// clock records now and returns it, or the latest time seen if now is
// earlier: time never goes backwards inside the engine.
func (e *Engine) clock(now time.Time) time.Time {
	if !e.begun {
		e.begun = true
		e.epoch = now
		e.now, e.nowSec = now, 0
		e.lastRequest = now
		return now
	}
	if now.After(e.now) {
		e.now, e.nowSec = now, e.second(now)
	}
	return e.now
}

// second returns the engine second containing t: whole seconds from the
// epoch, rounded down. It is computed with t.Sub, which uses the monotonic
// clock readings when both times carry one (as time.Now's do), so a step of
// the wall clock does not move samples between seconds; times without one
// (a simulator's) count by their wall clock. Sub saturates, so the result
// is within ±292 years' worth of seconds.
func (e *Engine) second(t time.Time) int64 {
	d := t.Sub(e.epoch)
	s := int64(d / time.Second)
	if d%time.Second < 0 {
		s--
	}
	return s
}

// maxSampleSkew is how far, in seconds, a sample may be from the engine's
// current second before Observe rejects it as invalid rather than merely
// stale: 100 years, far enough for any real gap.
const maxSampleSkew = 100 * 365 * 24 * 3600

// ExpectedColdStart is the mean of the observed starts (InstanceReady time
// minus start time), or Config.InitialColdStart before the first.
func (e *Engine) ExpectedColdStart() time.Duration {
	if e.coldStarts == 0 {
		return e.cfg.InitialColdStart
	}
	if e.coldStartMean >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(e.coldStartMean))
}

// PendingWait is how long a request may wait pending: the larger of
// MinPendingWait and PendingColdStartFactor × ExpectedColdStart.
func (e *Engine) PendingWait() time.Duration {
	return max(MinPendingWait, time.Duration(PendingColdStartFactor*float64(e.ExpectedColdStart())))
}

// Stats returns the engine's current counts.
func (e *Engine) Stats() Stats {
	return Stats{
		Starting:    len(e.starting),
		Ready:       len(e.ready),
		Draining:    e.draining,
		InFlight:    e.inFlight,
		Pending:     e.nPending,
		Recommended: e.rec.Count,
	}
}

// Instance describes instance id, or reports false if it is not starting,
// ready or draining.
func (e *Engine) Instance(id InstanceID) (InstanceInfo, bool) {
	in, ok := e.instances[id]
	if !ok {
		return InstanceInfo{}, false
	}
	info := InstanceInfo{
		ID: in.id, State: in.state, InFlight: in.inFlight, Queued: in.queued,
		ACT: in.act, ExpectedReady: in.expectedReady,
	}
	if in.state == Ready {
		for i, r := range e.ready {
			if r == in {
				info.Recommended = i < e.rec.Count
				break
			}
		}
	}
	return info, true
}

// Metrics returns what the policy would see at now: service-wide window
// averages and instance counts. It is not a read-only getter: like every
// Engine method it moves the engine's clock to now (if later) and slides
// the service windows to now's second, so a sample later passed to Observe
// for a second more than 10 minutes before now is stale. Tick calls it.
func (e *Engine) Metrics(now time.Time) Metrics {
	now = e.clock(now)
	sec := e.nowSec
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
	if d := sec - e.nowSec; d > maxSampleSkew || d < -maxSampleSkew {
		return fmt.Errorf("observe instance %d at %v: more than 100 years from the engine's time %v: %w", id, now, e.now, ErrInvalidSample)
	}
	for _, v := range [2]float64{cpuCores, concurrency} {
		if !(v >= 0 && v <= maxSample) {
			return fmt.Errorf("observe instance %d: value %v not in [0, %g]: %w", id, v, float64(maxSample), ErrInvalidSample)
		}
	}
	e.clock(now)
	// Both windows end at or before the engine's current second, so a
	// second inside the 10 minutes ending there is one both accept; the
	// service window is checked as well, so that the two never disagree.
	if e.nowSec-sec >= span10m || !e.svc.accepts(sec) || (in.win != nil && !in.win.accepts(sec)) {
		return fmt.Errorf("observe instance %d at %v: %w", id, now, ErrStaleSample)
	}
	if in.win == nil {
		in.win = e.takeWindow()
	}
	v := pair{cpu: int64(math.Round(cpuCores * milli)), conc: int64(math.Round(concurrency * milli))}
	delta, _ := in.win.put(sec, v, true)
	e.svc.put(sec, delta, false)

	if in.actSeen && sec <= in.actSec {
		return nil
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
	return nil
}

func (e *Engine) takeWindow() *window {
	if n := len(e.freeWindows); n > 0 {
		w := e.freeWindows[n-1]
		e.freeWindows = e.freeWindows[:n-1]
		return w
	}
	return newWindow(span1m, span10m)
}

// startInstance creates a starting instance at now.
func (e *Engine) startInstance(now time.Time) *instance {
	e.nextInstance++
	in := &instance{
		id:            e.nextInstance,
		state:         Starting,
		startedAt:     now,
		expectedReady: now.Add(e.ExpectedColdStart()),
		act:           e.cfg.MaxConcurrency,
	}
	e.instances[in.id] = in
	e.starting = append(e.starting, in)
	return in
}

func (e *Engine) total() int { return len(e.starting) + len(e.ready) + e.draining }

// InstanceReady records that starting instance id serves traffic from now
// on. Its start time feeds the expected cold start, it ranks after every
// instance already ready, and pending requests are dispatched to it.
func (e *Engine) InstanceReady(now time.Time, id InstanceID) (Events, error) {
	now = e.clock(now)
	e.ev.reset()
	in, ok := e.instances[id]
	if !ok {
		return e.ev, fmt.Errorf("instance %d ready: %w", id, ErrUnknownInstance)
	}
	if in.state != Starting {
		return e.ev, fmt.Errorf("instance %d ready while %v: %w", id, in.state, ErrNotStarting)
	}
	for i, s := range e.starting {
		if s == in {
			e.starting = append(e.starting[:i], e.starting[i+1:]...)
			break
		}
	}
	// A running mean in float64 rather than a sum of durations: it cannot
	// overflow however many and however long the starts.
	e.coldStarts++
	e.coldStartMean += (float64(now.Sub(in.startedAt)) - e.coldStartMean) / float64(e.coldStarts)
	in.state = Ready
	in.readyAt, in.lastActive, in.freeAt = now, now, now
	e.ready = append(e.ready, in)
	e.actSum += in.act
	e.dispatch(now, in)
	return e.ev, nil
}

// Route places a request arriving at now, in this order: a free slot on a
// recommended instance (the least loaded), else on a surplus instance (the
// best ranked); else it is queued on a starting instance expected ready
// no later than a new one would be; else queued on a ready instance if a slot
// is expected to free there sooner than a new instance would start (judged
// from the mean observed request time and how long the instance has been
// full; see expectedWait and the package documentation);
// else, below max instances, a new instance is started on demand and the
// request queued on it; else it is queued to wait at most PendingWait. Route hands out no pending request:
// slots freed by RequestDone and InstanceReady go to the oldest pending
// request at once, and any other free slot (after an ACT increase) at the
// next Tick.
func (e *Engine) Route(now time.Time) RouteResult {
	now = e.clock(now)
	e.nextRequest++
	id := e.nextRequest
	e.lastRequest = now

	if in := e.freeSlot(); in != nil {
		e.serve(now, id, in)
		return RouteResult{Request: id, Outcome: Served, Instance: in.id}
	}
	coldStart := e.ExpectedColdStart()
	target, started := e.starter(now.Add(coldStart)), false
	if target == nil {
		if in, wait := e.shortestWait(); in != nil && wait < coldStart {
			target = in
		}
	}
	if target == nil {
		if e.total() < e.cfg.MaxInstances {
			target, started = e.startInstance(now), true
		} else if target = e.starter(time.Time{}); target == nil {
			target, _ = e.shortestWait()
		}
	}
	deadline := e.enqueue(now, id, target)
	res := RouteResult{Request: id, Outcome: Queued, Started: started, Deadline: deadline}
	if target != nil {
		res.Instance = target.id
	}
	return res
}

// freeSlot returns the least loaded recommended instance with a free slot,
// else the best ranked surplus one with a free slot, else nil.
func (e *Engine) freeSlot() *instance {
	r := min(e.rec.Count, len(e.ready))
	var best *instance
	for _, in := range e.ready[:r] {
		if in.inFlight < in.act && (best == nil || in.inFlight < best.inFlight) {
			best = in
			if in.inFlight == 0 {
				break
			}
		}
	}
	if best != nil {
		return best
	}
	for _, in := range e.ready[r:] {
		if in.inFlight < in.act {
			return in
		}
	}
	return nil
}

// starter returns the starting instance with room in its queue that is
// expected ready earliest, if that is no later than by (no limit when by is
// zero): one expected ready as soon as a new instance would be is as good,
// and costs no extra instance.
func (e *Engine) starter(by time.Time) *instance {
	var best *instance
	for _, in := range e.starting {
		if in.queued >= in.act || (!by.IsZero() && in.expectedReady.After(by)) {
			continue
		}
		if best == nil || in.expectedReady.Before(best.expectedReady) {
			best = in
		}
	}
	return best
}

// shortestWait returns the ready instance where a queued request is
// expected to get a slot soonest (the fewest requests queued per slot), and
// that expected wait (expectedWait). Without an observed request time there
// is no estimate and the wait is the largest possible.
func (e *Engine) shortestWait() (*instance, time.Duration) {
	var best *instance
	for _, in := range e.ready {
		if best == nil || (in.queued+1)*best.act < (best.queued+1)*in.act {
			best = in
		}
	}
	if best == nil {
		return nil, time.Duration(math.MaxInt64)
	}
	return best, e.expectedWait(best, best.queued)
}

// expectedWait is when, from the engine's current time, a request queued
// on full ready instance in behind q others is expected to get a slot
// there. With S the mean request time (observeService) and F how long in
// has been full (since a request last started or finished on it), a slot
// is expected to free every I = max(S / ACT, F): the fluid rate of its
// slots, or, once it has gone longer than that without freeing one, as
// long again as it has gone (the requests in flight have outrun the mean).
// The wait is I × (q + 1 + requests in flight above ACT). While F ≤ S / ACT
// this is the fluid S × (q + 1) / ACT; it never reads "any moment now" for
// an instance whose slots have stopped freeing. Without an observed
// request time there is no estimate: the largest possible wait. O(1).
func (e *Engine) expectedWait(in *instance, q int) time.Duration {
	if e.services == 0 {
		return time.Duration(math.MaxInt64)
	}
	interval := max(e.serviceMean/float64(in.act), float64(e.now.Sub(in.freeAt)))
	wait := interval * float64(q+1+max(in.inFlight-in.act, 0))
	if !(wait < math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(wait)
}

// serviceSmoothing is the number of recent requests the mean request time
// effectively spans.
const serviceSmoothing = 1000

// observeService folds the time d of a finished request into the mean
// request time: the exact mean of the first serviceSmoothing requests,
// then an exponentially weighted moving average with weight
// 1/serviceSmoothing on the newest request (a time constant of about a
// thousand requests). It is a float64, so it neither overflows however
// many and however long the requests, nor drifts from a running sum.
func (e *Engine) observeService(d time.Duration) {
	if e.services < serviceSmoothing {
		e.services++
	}
	e.serviceMean += (float64(d) - e.serviceMean) / float64(e.services)
}

func (e *Engine) serve(now time.Time, id RequestID, in *instance) {
	// Every caller serves on a free slot: the instance had one at now.
	in.inFlight++
	in.lastActive, in.freeAt = now, now
	e.inFlight++
	e.requests[id] = request{inst: in, servedAt: now}
}

// enqueue adds request id to the pending queue, expected to run on target
// (which may be nil), and returns its deadline.
func (e *Engine) enqueue(now time.Time, id RequestID, target *instance) time.Time {
	if e.pendingHead > 64 && e.pendingHead > len(e.pending)/2 {
		n := copy(e.pending, e.pending[e.pendingHead:])
		e.pending = e.pending[:n]
		e.pendingBase += uint64(e.pendingHead)
		e.pendingHead = 0
	}
	deadline := now.Add(e.PendingWait())
	seq := e.pendingBase + uint64(len(e.pending))
	e.pending = append(e.pending, pendingEntry{id: id, deadline: deadline})
	e.nPending++
	if target != nil {
		target.queued++
	}
	e.requests[id] = request{inst: target, pending: true, seq: seq}
	return deadline
}

// unqueue removes pending request id, releasing its expected instance.
func (e *Engine) unqueue(id RequestID, r request) {
	e.pending[r.seq-e.pendingBase].done = true
	e.nPending--
	if r.inst != nil {
		r.inst.queued--
	}
	for e.pendingHead < len(e.pending) && e.pending[e.pendingHead].done {
		e.pendingHead++
	}
	delete(e.requests, id)
}

// dispatch gives in's free slots to the oldest pending requests.
func (e *Engine) dispatch(now time.Time, in *instance) {
	for in.state == Ready && in.inFlight < in.act && e.nPending > 0 {
		p := e.pending[e.pendingHead]
		r := e.requests[p.id]
		e.unqueue(p.id, r)
		e.serve(now, p.id, in)
		e.ev.Dispatched = append(e.ev.Dispatched, Dispatch{Request: p.id, Instance: in.id})
	}
}

// RequestDone records that request id finished at now. A pending request
// is abandoned. A slot freed on a ready instance goes to the oldest pending
// request; a draining instance left with nothing in flight is stopped.
func (e *Engine) RequestDone(now time.Time, id RequestID) (Events, error) {
	now = e.clock(now)
	e.ev.reset()
	r, ok := e.requests[id]
	if !ok {
		return e.ev, fmt.Errorf("request %d done: %w", id, ErrUnknownRequest)
	}
	e.lastRequest = now
	if r.pending {
		e.unqueue(id, r)
		return e.ev, nil
	}
	delete(e.requests, id)
	in := r.inst
	in.inFlight--
	in.lastActive, in.freeAt = now, now
	e.inFlight--
	e.observeService(now.Sub(r.servedAt))
	switch in.state {
	case Draining:
		if in.inFlight == 0 {
			e.draining--
			e.remove(in)
			e.ev.Stopped = append(e.ev.Stopped, in.id)
		}
	case Ready:
		e.dispatch(now, in)
	}
	return e.ev, nil
}

// InstanceExited records that instance id, starting, ready or draining,
// exited at now without the engine asking (it crashed, failed to start, or
// was lost). The engine forgets it at once; it is not reported in
// Events.Stopped. The requests that were running on it are forgotten too
// and returned in Events.Failed: the caller answers them (HTTP 502) and
// does not call RequestDone for them. Pending requests that were expected
// to run on it stay pending with their deadlines and are placed again as
// Route would place a new request: a free slot if one exists
// (Events.Dispatched), else a starting instance expected ready no later
// than a new one, else a ready instance whose slot should free sooner than
// a cold start, else a new instance started on demand (Events.Started)
// while below max instances, else the best instance there is. Instances
// to replace a lost ready one are started by the next Tick, as for any
// shortfall against the recommended count; with nothing in flight or
// pending, only a new request starts one from zero.
//
// An instance the engine already stopped (reported in Events.Stopped) or
// never started gives ErrUnknownInstance, which a caller that stops
// instances itself can ignore.
func (e *Engine) InstanceExited(now time.Time, id InstanceID) (Events, error) {
	now = e.clock(now)
	e.ev.reset()
	in, ok := e.instances[id]
	if !ok {
		return e.ev, fmt.Errorf("instance %d exited: %w", id, ErrUnknownInstance)
	}
	switch in.state {
	case Starting:
		e.starting = slices.DeleteFunc(e.starting, func(s *instance) bool { return s == in })
	case Ready:
		e.ready = slices.DeleteFunc(e.ready, func(r *instance) bool { return r == in })
		e.actSum -= in.act
	case Draining:
		e.draining--
	}
	if in.inFlight > 0 {
		for rid, r := range e.requests {
			if r.inst == in && !r.pending {
				e.ev.Failed = append(e.ev.Failed, rid)
			}
		}
		slices.Sort(e.ev.Failed)
		for _, rid := range e.ev.Failed {
			delete(e.requests, rid)
		}
		e.inFlight -= in.inFlight
		in.inFlight = 0
		e.lastRequest = now
	}
	if e.nPending > 0 {
		// Requests expected on it, and any expected on no instance (all
		// were draining at max instances), are placed again.
		coldStart := e.ExpectedColdStart()
		for i := e.pendingHead; i < len(e.pending); i++ {
			p := &e.pending[i]
			if p.done {
				continue
			}
			r := e.requests[p.id]
			if r.inst != in && r.inst != nil {
				continue
			}
			if r.inst != nil {
				in.queued--
			}
			r.inst = e.retarget(now, coldStart)
			if r.inst != nil {
				r.inst.queued++
			}
			e.requests[p.id] = r
		}
	}
	e.remove(in)
	if e.nPending > 0 {
		for _, r := range e.ready {
			e.dispatch(now, r)
			if e.nPending == 0 {
				break
			}
		}
	}
	return e.ev, nil
}

// retarget chooses the instance a pending request whose instance exited is
// expected to run on, in Route's order, starting one on demand below max
// instances (reported in Events.Started). It returns nil only when there
// is no instance at all and none may start.
func (e *Engine) retarget(now time.Time, coldStart time.Duration) *instance {
	if in := e.starter(now.Add(coldStart)); in != nil {
		return in
	}
	if in, wait := e.shortestWait(); in != nil && wait < coldStart {
		return in
	}
	if e.total() < e.cfg.MaxInstances {
		in := e.startInstance(now)
		e.ev.Started = append(e.ev.Started, in.id)
		return in
	}
	if in := e.starter(time.Time{}); in != nil {
		return in
	}
	in, _ := e.shortestWait()
	return in
}

// remove forgets a stopped instance and recycles its window.
func (e *Engine) remove(in *instance) {
	in.state = Stopped
	delete(e.instances, in.id)
	if in.win != nil {
		in.win.reset()
		e.freeWindows = append(e.freeWindows, in.win)
		in.win = nil
	}
}

// Tick makes one scaling decision at now; call it once a second (any
// rate works: windows are per second and policies pace themselves).
//
// In order: the policy recommends a count from the service metrics, which
// is bounded (see Decision); pending requests past their deadline get a new
// on-demand instance below max instances, and wait for it up to PendingWait
// again, or are rejected (429) at max; pending requests expected on a full
// ready instance whose slot is no longer expected before a cold start move
// to a starting or new on-demand instance (requeue);
// instances are started up to the recommended count, unless there are none
// and nothing asks for one (only a request scales from zero), and up to
// min instances; then ready instances beyond the recommended count (the
// surplus) are stopped if, after SurplusWindow ready, their utilisation
// over the last minute is under SurplusUtilisation (unless a request is
// pending or the recent need covers them; see Config.LiteralSurplusStop),
// or if they have been idle for Config.IdleTimeout, never going under min
// instances, nor to zero while a request is in flight or pending or within
// Config.IdleTimeout of the last request; finally free slots take pending
// requests.
func (e *Engine) Tick(now time.Time) Decision {
	now = e.clock(now)
	e.ev.reset()
	m := e.Metrics(now)
	rec := e.policy.Recommend(m)
	e.rec = e.bound(rec, m)

	e.expire(now)
	e.requeue(now)

	live := len(e.starting) + len(e.ready)
	if want := e.rec.Count - live; want > 0 && (live > 0 || e.rec.Count <= e.cfg.MinInstances || m.Active > 0) {
		for range min(want, e.cfg.MaxInstances-e.total()) {
			e.ev.Started = append(e.ev.Started, e.startInstance(now).id)
		}
	}

	e.scaleDown(now)

	if e.nPending > 0 {
		for _, in := range e.ready {
			e.dispatch(now, in)
			if e.nPending == 0 {
				break
			}
		}
	}
	return Decision{Recommendation: e.rec, Events: e.ev}
}

// bound applies the engine's rules to a policy's recommendation.
func (e *Engine) bound(rec Recommendation, m Metrics) Recommendation {
	if m.Active == 0 && (m.Live == 0 || m.Now.Sub(e.lastRequest) >= e.cfg.IdleTimeout) {
		rec.Count = 0
	}
	if m.Active > 0 {
		rec.Count = max(rec.Count, 1)
	}
	rec.Count = min(max(rec.Count, e.cfg.MinInstances), e.cfg.MaxInstances)
	return rec
}

// expire handles pending requests whose deadline has passed.
func (e *Engine) expire(now time.Time) {
	var fresh *instance // instance started in this pass with queue room
	for i := e.pendingHead; i < len(e.pending); i++ {
		p := &e.pending[i]
		if p.done || p.deadline.After(now) {
			continue
		}
		r := e.requests[p.id]
		if fresh == nil || fresh.queued >= fresh.act {
			fresh = nil
			if e.total() < e.cfg.MaxInstances {
				fresh = e.startInstance(now)
				e.ev.Started = append(e.ev.Started, fresh.id)
			}
		}
		if fresh == nil {
			e.unqueue(p.id, r)
			e.ev.Rejected = append(e.ev.Rejected, p.id)
			continue
		}
		if r.inst != nil {
			r.inst.queued--
		}
		r.inst = fresh
		fresh.queued++
		e.requests[p.id] = r
		p.deadline = now.Add(e.PendingWait())
	}
}

// requeue moves pending requests expected on a full ready instance whose
// slot is no longer expected to free before a new instance would be ready
// (expectedWait at their place in its queue, oldest first, at least the
// expected cold start) to a starting instance expected ready by then, else
// to a new instance started on demand below max instances; they keep their
// deadlines. Route judged the wait when the request arrived; the requests
// in flight may since have run longer than the mean it was judged by.
func (e *Engine) requeue(now time.Time) {
	if e.nPending == 0 || len(e.ready) == 0 {
		return
	}
	coldStart := e.ExpectedColdStart()
	for _, in := range e.ready {
		in.ahead = 0
	}
	for i := e.pendingHead; i < len(e.pending); i++ {
		p := &e.pending[i]
		if p.done {
			continue
		}
		r := e.requests[p.id]
		in := r.inst
		if in == nil || in.state != Ready || in.inFlight < in.act {
			continue
		}
		if e.expectedWait(in, in.ahead) < coldStart {
			in.ahead++
			continue
		}
		to := e.starter(now.Add(coldStart))
		if to == nil {
			if e.total() >= e.cfg.MaxInstances {
				in.ahead++
				continue
			}
			to = e.startInstance(now)
			e.ev.Started = append(e.ev.Started, to.id)
		}
		in.queued--
		to.queued++
		r.inst = to
		e.requests[p.id] = r
	}
}

// scaleDown stops or drains surplus instances, newest (lowest ranked)
// first.
func (e *Engine) scaleDown(now time.Time) {
	r := min(e.rec.Count, len(e.ready))
	if r == len(e.ready) {
		return
	}
	sec := e.second(now)
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
// seconds ending at second sec (the span of Knative's panic window), the
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

// underused reports whether surplus instance in has been ready for
// SurplusWindow and used less than SurplusUtilisation over the last
// minute (the larger of its CPU and concurrency utilisation).
func (e *Engine) underused(in *instance, now time.Time, sec int64) bool {
	if now.Sub(in.readyAt) < SurplusWindow {
		return false
	}
	var cpu, conc float64
	if in.win != nil {
		cpu, conc = in.win.average(0, sec)
	}
	util := max(cpu/e.cfg.CPUsPerInstance, conc/float64(e.cfg.MaxConcurrency))
	return util < SurplusUtilisation
}
