package autoscale

// This file is the engine's reconciler: instances starting, becoming ready,
// exiting on their own and being forgotten, and the expected cold start.

import (
	"fmt"
	"math"
	"slices"
	"time"
)

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
	win           *window   // nil until its first sample
	spanned       bool      // a span has been observed (ObserveSpan)
	spanEnd       time.Time // the end of the last span observed
	ahead         int       // requeue's count of pending requests kept on it
}

// ExpectedColdStart is the mean of the observed starts (InstanceReady time
// minus start time), or Config.InitialColdStart before the first, raised
// to how long the oldest instance still starting has been starting at the
// engine's current time: a start in progress for t shows a cold start
// takes at least t, whatever the guess or the past said.
func (e *Engine) ExpectedColdStart() time.Duration {
	d := e.cfg.InitialColdStart
	if e.coldStarts > 0 {
		d = time.Duration(math.MaxInt64)
		if e.coldStartMean < math.MaxInt64 {
			d = time.Duration(math.Round(e.coldStartMean))
		}
	}
	if len(e.starting) > 0 {
		d = max(d, e.now.Sub(e.starting[0].startedAt))
	}
	return d
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
	e.exited++
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
