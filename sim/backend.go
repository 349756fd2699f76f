package sim

// This file is the run's backend: instances of the autoscale engine, the
// requests they serve, and the once-a-second tick that observes them and
// asks the engine for its decision.

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

func (r *runner) serviceTime() int64 {
	mean := float64(r.sc.Backend.ServiceTime)
	if r.sc.Backend.Distribution == Fixed {
		return int64(mean)
	}
	return int64(math.Ceil(r.svcRnd.ExpFloat64() * mean))
}

func (r *runner) startInstance(id autoscale.InstanceID) {
	if r.rec != nil {
		r.rec.stats.ColdStarts++
	}
	r.insts = append(r.insts, &instance{id: id, last: r.now})
	r.push(r.now+int64(r.sc.Backend.ColdStart), evReady, 0, uint64(id))
}

func (r *runner) instance(id autoscale.InstanceID) *instance {
	i, ok := slices.BinarySearchFunc(r.insts, id, func(in *instance, id autoscale.InstanceID) int {
		return cmp.Compare(in.id, id)
	})
	if !ok {
		return nil
	}
	return r.insts[i]
}

func (r *runner) begin(ci int32, id autoscale.InstanceID) {
	r.calls[ci].inst = id
	if in := r.instance(id); in != nil {
		in.change(r.now, +1)
	}
	svc := r.calls[ci].svc
	if r.rec != nil {
		svc = r.rec.begin(r.now-r.calls[ci].start, svc)
	} else {
		svc = r.serviceTime()
	}
	r.push(r.now+svc, evDone, ci, 0)
}

func (r *runner) done(ci int32) {
	c := &r.calls[ci]
	if in := r.instance(c.inst); in != nil {
		in.change(r.now, -1)
	}
	ev, err := r.eng.RequestDone(r.time(), c.req)
	if err != nil {
		r.err = fmt.Errorf("sim: request done: %w", err)
		return
	}
	r.succeed(ci)
	r.handle(ev)
}

// handle carries out what the engine asked for.
func (r *runner) handle(ev autoscale.Events) {
	for _, id := range ev.Started {
		r.startInstance(id)
	}
	for _, d := range ev.Dispatched {
		ci, ok := r.pending[d.Request]
		if !ok {
			continue
		}
		delete(r.pending, d.Request)
		r.begin(ci, d.Instance)
	}
	for _, id := range ev.Rejected {
		ci, ok := r.pending[id]
		if !ok {
			continue
		}
		delete(r.pending, id)
		if r.rec != nil {
			r.rec.waited(r.now - r.calls[ci].start)
		}
		r.sec().Rejected++
		r.groups[r.calls[ci].group].sum.Rejected++
		r.fail(ci, true, 0)
	}
	for _, id := range ev.Stopped {
		r.insts = slices.DeleteFunc(r.insts, func(in *instance) bool { return in.id == id })
	}
}

// tick closes the second that ends now and makes the autoscaler's decision.
func (r *runner) tick() {
	k := int(r.now / int64(time.Second))
	if r.eng != nil {
		if k > 0 {
			obs := r.time().Add(-time.Nanosecond)
			for _, in := range r.insts {
				in.change(r.now, 0)
				conc := in.area / 1e9
				in.area = 0
				info, ok := r.eng.Instance(in.id)
				if !ok || info.State == autoscale.Starting {
					continue
				}
				cpu := min(conc*r.sc.Backend.CPUPerRequest, r.cpus)
				if err := r.eng.Observe(obs, in.id, cpu, conc); err != nil {
					r.err = fmt.Errorf("sim: observe: %w", err)
					return
				}
			}
			st := r.eng.Stats()
			s := r.second(k - 1)
			s.Starting, s.Ready, s.Draining, s.InFlight, s.Pending = st.Starting, st.Ready, st.Draining, st.InFlight, st.Pending
		}
		if r.rec != nil && r.rec.closed(r, k) {
			return // the recording has ended and every request with it
		}
		if r.rec != nil || k < len(r.secs) {
			d := r.eng.Tick(r.time())
			r.second(k).Recommended = d.Count
			r.handle(d.Events)
		}
	}
	if r.rec != nil || k < len(r.secs) {
		r.push(r.now+int64(time.Second), evTick, 0, 0)
	}
}

// second returns second k's record.
func (r *runner) second(k int) *Second {
	if r.rec != nil {
		return r.rec.second(r, k)
	}
	return &r.secs[k]
}
