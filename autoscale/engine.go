package autoscale

import (
	"errors"
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

// InstanceID identifies an instance; the engine assigns them from 1.
type InstanceID uint64

// RequestID identifies a request; the engine assigns them from 1.
type RequestID uint64

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
	// request is in flight or pending or an instance is live, until the
	// service has been idle for Config.IdleTimeout, and min when nothing
	// can scale from zero or after that idle timeout.
	Recommendation
	// Idle is true when the idle timeout set Count (no request for
	// Config.IdleTimeout): zero, or min instances.
	Idle bool
	// Exited is true when instances exited on their own (InstanceExited)
	// since the previous Tick and left none live, with no request in
	// flight or pending, so that Count is zero, or min instances (whose
	// replacements this Tick starts): the count fell because they
	// crashed, not for the idle timeout.
	Exited bool
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

	svc        *window // service-wide totals: spans 6 s, 1 min, 10 min
	sampled    bool    // a sample has been observed
	sampledSec int64   // the newest second observed; see metricEnd
	instances  map[InstanceID]*instance
	starting   []*instance // in start order
	ready      []*instance // in rank order: first ready ranks first
	draining   int
	actSum     int // sum of ACT over ready instances

	requests    map[RequestID]request
	pending     []pendingEntry
	pendingBase uint64 // seq of pending[0]
	pendingHead int
	nPending    int
	inFlight    int
	lastRequest time.Time // last time a request arrived or finished
	exited      int       // instances that exited on their own since the last Tick

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
	var idle, exited bool
	e.rec, idle, exited = e.bound(rec, m)
	e.exited = 0

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
	return Decision{Recommendation: e.rec, Idle: idle, Exited: exited, Events: e.ev}
}
