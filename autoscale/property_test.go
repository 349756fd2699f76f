package autoscale

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkInvariants fails tb if the engine's books do not balance or a bound
// is broken.
func checkInvariants(tb testing.TB, e *Engine) {
	tb.Helper()
	c := e.cfg
	if e.total() > c.MaxInstances {
		tb.Fatalf("%d instances above max %d", e.total(), c.MaxInstances)
	}
	inFlight, queued, draining, actSum := 0, 0, 0, 0
	for _, in := range e.instances {
		inFlight += in.inFlight
		queued += in.queued
		if in.act < 1 || in.act > c.MaxConcurrency {
			tb.Fatalf("instance %d ACT %d outside [1, %d]", in.id, in.act, c.MaxConcurrency)
		}
		switch in.state {
		case Draining:
			draining++
			if in.inFlight == 0 {
				tb.Fatalf("draining instance %d with nothing in flight", in.id)
			}
		case Ready:
			actSum += in.act
		}
	}
	for _, in := range e.ready {
		if in.state != Ready {
			tb.Fatalf("instance %d in the ready list is %v", in.id, in.state)
		}
	}
	for _, in := range e.starting {
		if in.state != Starting {
			tb.Fatalf("instance %d in the starting list is %v", in.id, in.state)
		}
	}
	if len(e.instances) != e.total() || draining != e.draining {
		tb.Fatalf("%d instances known, %d counted; %d draining, %d counted", len(e.instances), e.total(), draining, e.draining)
	}
	if inFlight != e.inFlight || actSum != e.actSum {
		tb.Fatalf("in flight %d vs %d; ACT sum %d vs %d", inFlight, e.inFlight, actSum, e.actSum)
	}
	// Every request runs on, or waits for, an instance the engine knows:
	// none is left on one that stopped or exited.
	for id, r := range e.requests {
		if r.inst != nil && e.instances[r.inst.id] != r.inst {
			tb.Fatalf("request %d is on instance %d, which is %v", id, r.inst.id, r.inst.state)
		}
		if r.inst == nil && !r.pending {
			tb.Fatalf("request %d runs on no instance", id)
		}
	}
	pending := 0
	for _, p := range e.pending[e.pendingHead:] {
		if !p.done {
			pending++
		}
	}
	if pending != e.nPending || queued > e.nPending || len(e.requests) != e.inFlight+e.nPending {
		tb.Fatalf("pending %d vs %d, queued %d, requests %d vs %d", pending, e.nPending, queued, len(e.requests), e.inFlight+e.nPending)
	}
	if e.nPending > 0 && e.total() == 0 && e.cfg.MaxInstances > 0 {
		tb.Fatalf("%d requests pending with no instance at all", e.nPending)
	}
}

// driveEngine feeds the engine a stream of operations decoded from ops,
// acting on its events the way a gateway would, and checks the invariants
// after every step.
func driveEngine(tb testing.TB, ops []byte) {
	next := func() byte {
		if len(ops) == 0 {
			return 0
		}
		b := ops[0]
		ops = ops[1:]
		return b
	}
	cfg := Config{
		MinInstances:    int(next() % 3),
		MaxInstances:    1 + int(next()%6),
		MaxConcurrency:  1 + int(next()%8),
		CPUsPerInstance: []float64{1, 2, 0.5}[next()%3],
	}
	cfg.MinInstances = min(cfg.MinInstances, cfg.MaxInstances)
	switch next() % 3 {
	case 1:
		cfg.Policy = NewKnativeKPA(cfg)
	case 2:
		cfg.Policy = NewKubernetesHPA(cfg)
	}
	e, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	now := t0
	var starting, live []InstanceID
	var outstanding []RequestID
	drop := func(list []InstanceID, id InstanceID) []InstanceID {
		if i := slices.Index(list, id); i >= 0 {
			return slices.Delete(list, i, i+1)
		}
		return list
	}
	apply := func(ev Events) {
		starting = append(starting, ev.Started...)
		for _, id := range ev.Stopped {
			live = drop(live, id)
		}
		for _, id := range ev.Rejected {
			i := slices.Index(outstanding, id)
			if i < 0 {
				tb.Fatalf("rejected unknown request %d", id)
			}
			outstanding = slices.Delete(outstanding, i, i+1)
		}
		for _, id := range ev.Failed {
			i := slices.Index(outstanding, id)
			if i < 0 {
				tb.Fatalf("failed unknown request %d", id)
			}
			outstanding = slices.Delete(outstanding, i, i+1)
		}
	}
	for len(ops) > 0 {
		switch op := next() % 8; op {
		case 0:
			b := next()
			now = now.Add(time.Duration(b%4)*time.Second + time.Duration(b)*time.Millisecond)
			if b > 250 {
				now = now.Add(time.Duration(b) * 4 * time.Second)
			}
		case 1:
			r := e.Route(now)
			outstanding = append(outstanding, r.Request)
			if r.Started {
				starting = append(starting, r.Instance)
			}
		case 2:
			if len(outstanding) > 0 {
				i := int(next()) % len(outstanding)
				ev, err := e.RequestDone(now, outstanding[i])
				if err != nil {
					tb.Fatal(err)
				}
				outstanding = slices.Delete(outstanding, i, i+1)
				apply(ev)
			}
		case 3:
			if len(starting) > 0 {
				i := int(next()) % len(starting)
				id := starting[i]
				starting = slices.Delete(starting, i, i+1)
				ev, err := e.InstanceReady(now, id)
				if err != nil {
					tb.Fatal(err)
				}
				live = append(live, id)
				apply(ev)
			}
		case 4, 5:
			cpu := float64(next()%13) / 10 * cfg.CPUsPerInstance
			conc := float64(next() % 12)
			for _, id := range live {
				if err := e.Observe(now, id, cpu, conc); err != nil && !errors.Is(err, ErrStaleSample) {
					tb.Fatal(err)
				}
			}
		case 6:
			d := e.Tick(now)
			apply(d.Events)
			st := e.Stats()
			c := e.cfg
			if d.Count < c.MinInstances || d.Count > c.MaxInstances {
				tb.Fatalf("recommended %d outside [%d, %d]", d.Count, c.MinInstances, c.MaxInstances)
			}
			if st.Starting+st.Ready < c.MinInstances {
				tb.Fatalf("%d live instances below min %d", st.Starting+st.Ready, c.MinInstances)
			}
			if st.InFlight+st.Pending > 0 && d.Count == 0 {
				tb.Fatal("recommended zero with requests in flight or pending")
			}
		case 7:
			switch b := next(); {
			case b < 8:
				e.NewDeployment()
			case b < 16 && len(live) > 0:
				if err := e.Observe(now, live[0], math.NaN(), 0); !errors.Is(err, ErrInvalidSample) {
					tb.Fatalf("NaN sample: %v", err)
				}
			case b < 40 && len(live)+len(starting) > 0:
				// An instance exits on its own, in whatever state.
				i := int(next()) % (len(live) + len(starting))
				var id InstanceID
				if i < len(live) {
					id = live[i]
					live = slices.Delete(live, i, i+1)
				} else {
					i -= len(live)
					id = starting[i]
					starting = slices.Delete(starting, i, i+1)
				}
				ev, err := e.InstanceExited(now, id)
				if err != nil {
					tb.Fatalf("instance %d exited: %v", id, err)
				}
				apply(ev)
				if _, err := e.InstanceExited(now, id); !errors.Is(err, ErrUnknownInstance) {
					tb.Fatalf("instance %d exited twice: %v", id, err)
				}
			case b < 48 && len(live) > 0:
				for _, at := range [2]time.Time{time.Unix(-1<<62, 0), time.Unix(1<<62, 0)} {
					if err := e.Observe(at, live[0], 1, 1); !errors.Is(err, ErrInvalidSample) {
						tb.Fatalf("sample at %v: %v, want ErrInvalidSample", at, err)
					}
				}
			}
		}
		checkInvariants(tb, e)
		if len(outstanding) != e.inFlight+e.nPending {
			tb.Fatalf("caller holds %d requests, engine %d", len(outstanding), e.inFlight+e.nPending)
		}
	}
}

func FuzzEngine(f *testing.F) {
	f.Add([]byte{0, 2, 3, 0, 1, 1, 1, 6, 3, 0, 0, 9, 4, 5, 3, 6, 2, 0})
	f.Add([]byte{1, 5, 1, 1, 1, 1, 1, 1, 0, 255, 6, 0, 20, 6, 3, 1, 6})
	f.Add([]byte{2, 1, 7, 2, 4, 12, 11, 6, 0, 3, 6, 7, 3, 7, 12})
	f.Add([]byte{0, 2, 3, 0, 0, 1, 3, 0, 7, 20, 4, 5, 3, 6, 0, 9, 7, 23, 6})
	f.Add([]byte{0, 3, 0, 0, 1, 1, 3, 0, 1, 1, 1, 7, 30, 0, 6, 3, 0, 2, 0, 7, 30, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		driveEngine(t, ops)
	})
}

// randomOps returns n operation bytes biased towards a busy service.
func randomOps(rng *rand.Rand, n int) []byte {
	ops := make([]byte, n)
	for i := range ops {
		ops[i] = byte(rng.IntN(256))
	}
	return ops
}

func TestPropertyBoundsHoldOnRandomMetricStreams(t *testing.T) {
	for seed := range uint64(300) {
		driveEngine(t, randomOps(rand.New(rand.NewPCG(seed, 42)), 3000))
	}
}

func TestPropertyConstantLoadInsideBandNeverChangesCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 40 {
		n := 1 + rng.IntN(60)
		util := 0.54 + rng.Float64()*0.12
		cpuDriven := trial%2 == 0
		e := newEngine(t, Config{MaxInstances: 100})
		ids := readyInstances(t, e, sec(0), n)
		e.rec.Count = n
		e.Route(sec(0)) // a request in flight: the service is not idle
		cpu, conc := util, 1.0
		if !cpuDriven {
			cpu, conc = 0.1, util*DefaultMaxConcurrency // concurrency utilisation = util
		}
		for s := 0; s < 1800; s++ {
			for _, id := range ids {
				if err := e.Observe(sec(float64(s)), id, cpu, conc); err != nil {
					t.Fatal(err)
				}
			}
			d := e.Tick(sec(float64(s)))
			if d.Count != n || len(d.Started)+len(d.Stopped)+len(d.Draining) != 0 {
				t.Fatalf("trial %d: %d instances at %.3f utilisation (cpu-driven %v): second %d gave %+v",
					trial, n, util, cpuDriven, s, d)
			}
		}
	}
}
