package autoscale

// This file is the engine's throttler: where a request runs (Route), the
// pending queue and its deadlines, and the expected wait on a full instance.

import (
	"fmt"
	"math"
	"time"
)

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

	// Deadline is, for a queued request, when its wait ends as judged on
	// arrival: then a new instance is started for it, or at max instances
	// it fails with 429. A start still in progress by then lengthens the
	// wait (see PendingWait).
	Deadline time.Time
}

// Dispatch is a pending request given a slot.
type Dispatch struct {
	// Request is the pending request.
	Request RequestID
	// Instance now runs it.
	Instance InstanceID
}

type request struct {
	inst     *instance // running on it, or pending and expected to
	pending  bool
	seq      uint64 // position in the pending queue while pending
	servedAt time.Time
}

type pendingEntry struct {
	id    RequestID
	since time.Time // start of its current wait: arrival, or the hedge's start
	done  bool
}

// PendingWait is how long a request may wait pending: the larger of
// MinPendingWait and PendingColdStartFactor × ExpectedColdStart, as
// known at the engine's current time.
func (e *Engine) PendingWait() time.Duration {
	return max(MinPendingWait, time.Duration(PendingColdStartFactor*float64(e.ExpectedColdStart())))
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
	e.pending = append(e.pending, pendingEntry{id: id, since: now})
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

// expire handles pending requests that have waited PendingWait. The wait
// is judged now, not when the request arrived: an instance still starting
// raises the expected cold start (ExpectedColdStart), so a request queued
// on an instance on its way does not hedge with another one every
// MinPendingWait while a slow start goes on.
func (e *Engine) expire(now time.Time) {
	var fresh *instance // instance started in this pass with queue room
	wait := e.PendingWait()
	for i := e.pendingHead; i < len(e.pending); i++ {
		p := &e.pending[i]
		if p.done || p.since.Add(wait).After(now) {
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
		p.since = now
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
