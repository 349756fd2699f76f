package sim

// This file plays recorded requests, rather than generated ones, through
// the autoscaled backend: the autoscaling engine of package replay. The
// runner is Run's; only the source of its arrivals differs.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// MaxRecordedSpan bounds the virtual time a Scaler plays: its arrivals
// must fall within this span of the first.
const MaxRecordedSpan = 31 * 24 * time.Hour

// ErrOutOfOrder reports an arrival given to a Scaler before the one
// given last.
var ErrOutOfOrder = errors.New("sim: arrival before the previous one")

// ScalerStats totals a Scaler's run.
type ScalerStats struct {
	// Requests are the arrivals given; each is Served (to its end or to
	// its timeout), Rejected (HTTP 429 after waiting pending at max
	// instances), or abandoned pending at its timeout.
	Requests, Served, Rejected int64
	// OverTimeout are the requests that reached the request timeout:
	// abandoned pending, or cut off running.
	OverTimeout int64
	// Pending are the requests that waited for an instance (served,
	// rejected or abandoned), and WaitP50 and WaitP99 the percentiles of
	// their waits (to the millisecond).
	Pending          int64
	WaitP50, WaitP99 time.Duration
	// ColdStarts are the instances started.
	ColdStarts int64
	// Seconds is the span played, in virtual seconds, to the last request's end.
	Seconds int64
	// PeakInstances and MeanInstances are the instances (starting, ready
	// or draining) at the end of a second, the most and the mean over the
	// span; InstanceSeconds is their sum.
	PeakInstances   int
	MeanInstances   float64
	InstanceSeconds int64
}

// recorder is what a Scaler adds to a runner.
type recorder struct {
	secs     []Second // from second base on
	base     int
	finished bool // no more arrivals
	timeout  int64
	waits    map[int64]int64 // pending waits by millisecond
	stats    ScalerStats
	onSecond func(Second)
}

// A Scaler plays recorded requests, given one by one in time order with
// their service times, through the autoscaled backend b, as Run plays the
// calls its throttle admits: the same engine, instances, cold starts,
// pending queue and 429s at max instances, on a virtual clock starting at
// 0. No bucket stands in front. Its memory holds the requests in flight
// and pending and a second or two of statistics, not every request.
//
// A Scaler is not safe for concurrent use.
type Scaler struct {
	r      *runner
	held   bool // an arrival event is in the queue
	heldAt int64
	last   int64
	done   bool
}

// NewScaler returns a Scaler for backend b (zero fields take Run's
// defaults; b.ServiceTime and b.Distribution are unused, as every request
// brings its own). A request whose pending wait and service time pass
// timeout is cut off at it; 0 means no timeout. onSecond, when not nil,
// is called with every second as it closes, in order.
func NewScaler(b Backend, timeout time.Duration, onSecond func(Second)) (*Scaler, error) {
	if b.None {
		return nil, fmt.Errorf("%w: backend: a Scaler needs one", ErrInvalidScenario)
	}
	if timeout < 0 {
		return nil, fmt.Errorf("%w: request timeout %v is negative", ErrInvalidScenario, timeout)
	}
	sc := Scenario{Duration: time.Second, Backend: b, Retry: Retry{Disabled: true}}
	sc = sc.withDefaults()
	if err := sc.validate(); err != nil {
		return nil, err
	}
	r := &runner{
		sc:     sc,
		end:    int64(MaxRecordedSpan) + int64(time.Hour),
		svcRnd: rand.New(rand.NewPCG(0, 2)),
		rtyRnd: rand.New(rand.NewPCG(0, 3)),
		groups: []group{{Clients: Clients{Name: "recorded"}}},
		rec:    &recorder{timeout: int64(timeout), waits: map[int64]int64{}, onSecond: onSecond},
	}
	if _, err := r.newRev(0, sc.Backend.revisionsWithDefaults()[0], sc.Backend.Autoscale); err != nil {
		return nil, err
	}
	r.push(0, evTick, 0, 0)
	return &Scaler{r: r}, nil
}

// Arrive plays a request arriving at virtual time at that runs for
// service on its instance. at must not be before the previous arrival's,
// and within MaxRecordedSpan of 0; service must not be negative.
func (s *Scaler) Arrive(at, service time.Duration) error {
	if s.done {
		return errors.New("sim: Arrive after Finish")
	}
	if int64(at) < s.last || at < 0 {
		return fmt.Errorf("%w: %v after %v", ErrOutOfOrder, at, time.Duration(s.last))
	}
	if service < 0 {
		return fmt.Errorf("sim: arrival at %v: service time %v is negative", at, service)
	}
	if at > MaxRecordedSpan {
		return fmt.Errorf("sim: arrival at %v: more than %v after the first", at, MaxRecordedSpan)
	}
	if err := s.runHeld(); err != nil {
		return err
	}
	s.last = int64(at)
	s.r.push(int64(at), evArrival, 0, uint64(service))
	s.held = true
	return nil
}

// runHeld runs the queue up to and including the arrival it holds, as
// Run's loop would before the next arrival joins the queue.
func (s *Scaler) runHeld() error {
	r := s.r
	for s.held && len(r.events) > 0 && r.err == nil {
		e := r.events.pop()
		r.now = e.at
		if e.kind == evArrival {
			s.held = false
			r.arrive(int64(e.id))
			continue
		}
		r.step(e)
	}
	return r.err
}

// Finish plays the requests in flight and pending to their end and
// returns the run's totals.
func (s *Scaler) Finish() (ScalerStats, error) {
	r := s.r
	if !s.done {
		s.done = true
		if err := s.runHeld(); err != nil {
			return ScalerStats{}, err
		}
		r.rec.finished = true
		for len(r.events) > 0 && r.err == nil {
			e := r.events.pop()
			r.now = e.at
			r.step(e)
		}
		if r.err != nil {
			return ScalerStats{}, r.err
		}
		r.rec.summarise()
	}
	return r.rec.stats, nil
}

// arrive starts a recorded request that runs svc on its instance:
// newCall and attempt of Run, admitted without a bucket.
func (r *runner) arrive(svc int64) {
	r.rec.stats.Requests++
	var ci int32
	r.epochs++
	c := call{start: r.now, seq: r.started, svc: svc, epoch: r.epochs}
	r.started++
	if n := len(r.free); n > 0 {
		ci = r.free[n-1]
		r.free = r.free[:n-1]
		r.calls[ci] = c
	} else {
		ci = int32(len(r.calls))
		r.calls = append(r.calls, c)
	}
	s := r.sec()
	s.Attempts++
	s.FirstAttempts++
	s.Admitted++
	rv := r.revs[0]
	r.route(ci, rv)
	if _, queued := rv.pending[r.calls[ci].req]; queued && r.rec.timeout > 0 {
		r.push(r.now+r.rec.timeout, evTimeout, 0, uint64(r.calls[ci].req))
	}
}

// step dispatches e, a Scaler's timeouts included.
func (r *runner) step(e event) {
	if e.kind != evTimeout {
		r.dispatch(e)
		return
	}
	id := autoscale.RequestID(e.id)
	rv := r.revs[0]
	ci, ok := rv.pending[id]
	if !ok {
		return // served or rejected before its timeout
	}
	delete(rv.pending, id)
	r.rec.stats.OverTimeout++
	r.rec.waited(r.rec.timeout)
	ev, err := rv.eng.RequestDone(r.time(), id) // abandons it
	if err != nil {
		r.err = fmt.Errorf("sim: request timeout: %w", err)
		return
	}
	r.giveUp(ci)
	r.handle(rv, ev)
}

// begin records a request's pending wait and returns how long it runs:
// svc, or what is left of the timeout.
func (rc *recorder) begin(wait, svc int64) int64 {
	rc.waited(wait)
	if rc.timeout > 0 && wait+svc > rc.timeout {
		rc.stats.OverTimeout++
		return max(rc.timeout-wait, 0)
	}
	return svc
}

// waited records a request's pending wait, if any.
func (rc *recorder) waited(wait int64) {
	if wait > 0 {
		rc.stats.Pending++
		rc.waits[wait/int64(time.Millisecond)]++
	}
}

// second returns second k's record, growing the kept seconds to it.
func (rc *recorder) second(r *runner, k int) *Second {
	for k-rc.base >= len(rc.secs) {
		rc.secs = append(rc.secs, Second{Start: time.Duration(rc.base+len(rc.secs)) * time.Second})
	}
	return &rc.secs[max(k-rc.base, 0)]
}

// closed hands on the seconds before k, now closed, and reports whether
// the run is over: no arrival to come and no request left.
func (rc *recorder) closed(r *runner, k int) bool {
	for rc.base < k && len(rc.secs) > 0 {
		s := rc.secs[0]
		rc.secs = rc.secs[1:]
		rc.base++
		n := s.Starting + s.Ready + s.Draining
		rc.stats.Seconds++
		rc.stats.InstanceSeconds += int64(n)
		rc.stats.PeakInstances = max(rc.stats.PeakInstances, n)
		rc.stats.Rejected += int64(s.Rejected)
		if rc.onSecond != nil {
			rc.onSecond(s)
		}
	}
	if rc.finished && rc.stats.Served+int64(r.sum.Failed) == rc.stats.Requests {
		r.events = r.events[:0]
		return true
	}
	return false
}

func (rc *recorder) summarise() {
	s := &rc.stats
	if s.Seconds > 0 {
		s.MeanInstances = float64(s.InstanceSeconds) / float64(s.Seconds)
	}
	ms := make([]int64, 0, len(rc.waits))
	for w := range rc.waits {
		ms = append(ms, w)
	}
	slices.Sort(ms)
	at := func(p float64) time.Duration {
		rank := int64(math.Ceil(p * float64(s.Pending)))
		var seen int64
		for _, w := range ms {
			if seen += rc.waits[w]; seen >= max(rank, 1) {
				return time.Duration(w) * time.Millisecond
			}
		}
		return 0
	}
	s.WaitP50, s.WaitP99 = at(0.50), at(0.99)
}
