package sim

// This file is the run's backend: the revisions of the autoscaled
// service, each with its own engine, instances and pending requests, the
// requests they serve, and the once-a-second tick that observes them and
// asks each engine for its decision.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

type instance struct {
	id       autoscale.InstanceID
	inFlight int
	area     float64 // request-nanoseconds this second
	last     int64
}

func (in *instance) change(now int64, d int) {
	in.area += float64(in.inFlight) * float64(now-in.last)
	in.last = now
	in.inFlight += d
}

// backendRev is one revision of the backend: an engine of its own, as
// each revision of a pool's service has, with its instances and the
// calls pending on it.
type backendRev struct {
	idx     int32
	spec    Revision         // with the backend's defaults applied
	cfg     autoscale.Config // as configured, before a warm-up floor
	eng     *autoscale.Engine
	cpus    float64
	insts   []*instance
	pending map[autoscale.RequestID]int32
	lastRec int // the count of its last Tick, for serving
	floor   int // a warm-up minimum, 0 for none (pool's setFloor)
	// retired: it takes no new request and drains until retireBy;
	// stopped: drained, its instances gone.
	retired, stopped bool
	retireBy         int64
	series           *RevisionSeries // nil in a Scaler
}

// newRev makes revision idx of the backend with engine config cfg.
func (r *runner) newRev(idx int, spec Revision, cfg autoscale.Config) (*backendRev, error) {
	c := cfg
	c.Policy = r.sc.Backend.policy(c)
	eng, err := autoscale.New(c)
	if err != nil {
		return nil, fmt.Errorf("%w: backend: %w", ErrInvalidScenario, err)
	}
	rv := &backendRev{idx: int32(idx), spec: spec, cfg: cfg, eng: eng, cpus: eng.Config().CPUsPerInstance,
		pending: make(map[autoscale.RequestID]int32)}
	r.revs = append(r.revs, rv)
	return rv, nil
}

// serviceTime draws a request's service time on rv.
func (r *runner) serviceTime(rv *backendRev) int64 {
	mean := float64(rv.spec.ServiceTime)
	if r.sc.Backend.Distribution == Fixed {
		return int64(mean)
	}
	return int64(math.Ceil(r.svcRnd.ExpFloat64() * mean))
}

func (r *runner) startInstance(rv *backendRev, id autoscale.InstanceID) {
	if r.rec != nil {
		r.rec.stats.ColdStarts++
	}
	rv.insts = append(rv.insts, &instance{id: id, last: r.now})
	r.push(r.now+int64(rv.spec.ColdStart), evReady, rv.idx, uint64(id))
}

func (rv *backendRev) instance(id autoscale.InstanceID) *instance {
	i, ok := slices.BinarySearchFunc(rv.insts, id, func(in *instance, id autoscale.InstanceID) int {
		return cmp.Compare(in.id, id)
	})
	if !ok {
		return nil
	}
	return rv.insts[i]
}

// route gives call ci to revision rv, which serves it or queues it.
func (r *runner) route(ci int32, rv *backendRev) {
	rr := rv.eng.Route(r.time())
	if rr.Started {
		r.startInstance(rv, rr.Instance)
	}
	c := &r.calls[ci]
	c.req, c.rev, c.live = rr.Request, rv.idx, true
	if rv.series != nil {
		rv.series.Requests[r.secIndex()]++
	}
	if rr.Outcome == autoscale.Served {
		r.begin(ci, rv, rr.Instance)
	} else {
		rv.pending[rr.Request] = ci
	}
}

func (r *runner) begin(ci int32, rv *backendRev, id autoscale.InstanceID) {
	r.calls[ci].inst = id
	if in := rv.instance(id); in != nil {
		in.change(r.now, +1)
	}
	svc := r.calls[ci].svc
	if r.rec != nil {
		svc = r.rec.begin(r.now-r.calls[ci].start, svc)
	} else {
		svc = r.serviceTime(rv)
	}
	r.push(r.now+svc, evDone, ci, r.calls[ci].epoch)
}

func (r *runner) done(ci int32, epoch uint64) {
	c := &r.calls[ci]
	if c.epoch != epoch {
		return // cut off when its revision stopped; the slot was reused
	}
	rv := r.revs[c.rev]
	if in := rv.instance(c.inst); in != nil {
		in.change(r.now, -1)
	}
	ev, err := rv.eng.RequestDone(r.time(), c.req)
	if err != nil {
		r.err = fmt.Errorf("sim: request done: %w", err)
		return
	}
	r.succeed(ci)
	r.handle(rv, ev)
}

// handle carries out what rv's engine asked for.
func (r *runner) handle(rv *backendRev, ev autoscale.Events) {
	for _, id := range ev.Started {
		r.startInstance(rv, id)
	}
	for _, d := range ev.Dispatched {
		ci, ok := rv.pending[d.Request]
		if !ok {
			continue
		}
		delete(rv.pending, d.Request)
		r.begin(ci, rv, d.Instance)
	}
	for _, id := range ev.Rejected {
		ci, ok := rv.pending[id]
		if !ok {
			continue
		}
		delete(rv.pending, id)
		r.calls[ci].live = false
		if r.rec != nil {
			r.rec.waited(r.now - r.calls[ci].start)
		}
		r.sec().Rejected++
		r.groups[r.calls[ci].group].sum.Rejected++
		r.fail(ci, true, 0)
	}
	for _, id := range ev.Stopped {
		rv.insts = slices.DeleteFunc(rv.insts, func(in *instance) bool { return in.id == id })
	}
}

// tick closes the second that ends now and makes each revision's
// autoscaler decide.
func (r *runner) tick() {
	k := int(r.now / int64(time.Second))
	if r.buckets != nil && k > 0 {
		r.closeBuckets(k - 1)
	}
	if len(r.revs) > 0 {
		if k > 0 {
			s := r.second(k - 1)
			s.Starting, s.Ready, s.Draining, s.InFlight, s.Pending = 0, 0, 0, 0, 0
			for _, rv := range r.revs {
				if rv.stopped {
					continue
				}
				if !r.observe(rv) {
					return
				}
				st := rv.eng.Stats()
				s.Starting += st.Starting
				s.Ready += st.Ready
				s.Draining += st.Draining
				s.InFlight += st.InFlight
				s.Pending += st.Pending
				if rv.series != nil && k-1 < len(rv.series.Ready) {
					rv.series.Starting[k-1], rv.series.Ready[k-1], rv.series.Draining[k-1] = st.Starting, st.Ready, st.Draining
				}
			}
			if r.svc != nil {
				r.svc.closeSecond(r, k-1)
			}
		}
		if r.rec != nil && r.rec.closed(r, k) {
			return // the recording has ended and every request with it
		}
		if r.rec != nil || k < len(r.secs) {
			rec := 0
			for _, rv := range r.revs {
				if rv.stopped {
					continue
				}
				d := rv.eng.Tick(r.time())
				rv.lastRec = d.Count
				if !rv.retired {
					rec += d.Count
				}
				r.handle(rv, d.Events)
			}
			r.second(k).Recommended = rec
			if r.svc != nil {
				r.svc.tick(r)
			}
		}
	}
	if r.rec != nil || k < len(r.secs) {
		r.push(r.now+int64(time.Second), evTick, 0, 0)
	}
}

// observe gives rv's engine the second that ends now of each of its
// instances; false when the engine refused one (r.err says why).
func (r *runner) observe(rv *backendRev) bool {
	obs := r.time().Add(-time.Nanosecond)
	for _, in := range rv.insts {
		in.change(r.now, 0)
		conc := in.area / 1e9
		in.area = 0
		info, ok := rv.eng.Instance(in.id)
		if !ok || info.State == autoscale.Starting {
			continue
		}
		cpu := min(conc*rv.spec.CPUPerRequest, rv.cpus)
		if err := rv.eng.Observe(obs, in.id, cpu, conc); err != nil {
			r.err = fmt.Errorf("sim: observe: %w", err)
			return false
		}
	}
	return true
}

// ready tells rv's engine instance id is ready.
func (r *runner) ready(rv *backendRev, id autoscale.InstanceID) {
	if rv.stopped {
		return
	}
	ev, err := rv.eng.InstanceReady(r.time(), id)
	if err != nil {
		r.err = fmt.Errorf("sim: instance ready: %w", err)
		return
	}
	r.handle(rv, ev)
	if r.svc != nil {
		r.check()
	}
}

// second returns second k's record.
func (r *runner) second(k int) *Second {
	if r.rec != nil {
		return r.rec.second(r, k)
	}
	return &r.secs[k]
}

// secIndex is the index of the second now is in, within the run.
func (r *runner) secIndex() int {
	return min(int(r.now/int64(time.Second)), len(r.secs)-1)
}
