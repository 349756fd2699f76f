package autoscale

import (
	"testing"
	"time"
)

// traceResult summarises one policy's run of a load trace.
type traceResult struct {
	peak, final, rejected, served int
	instanceSeconds               int // sum over seconds of instances held
}

// runTrace drives an engine second by second through a closed-loop trace:
// load(s) requests arrive in second s and each runs for one second, so the
// concurrency is about load(s); instances are ready 2 s after they are
// started; each reports its requests in flight as concurrency and 1.2 % of
// a CPU per request. Invariants are checked every second.
func runTrace(t *testing.T, cfg Config, seconds int, load func(s int) int) traceResult {
	t.Helper()
	e := newEngine(t, cfg)
	var res traceResult
	readyAt := map[InstanceID]int{}
	live := map[InstanceID]bool{}
	doneAt := map[RequestID]int{}
	handle := func(ev Events, s int) {
		for _, id := range ev.Started {
			readyAt[id] = s + 2
		}
		for _, id := range ev.Stopped {
			delete(live, id)
		}
		for _, d := range ev.Dispatched {
			doneAt[d.Request] = s + 1
			res.served++
		}
		for _, id := range ev.Rejected {
			delete(doneAt, id)
			res.rejected++
		}
	}
	for s := 0; s < seconds; s++ {
		now := sec(float64(s))
		for id, at := range readyAt {
			if at <= s {
				delete(readyAt, id)
				live[id] = true
				ev, err := e.InstanceReady(now, id)
				if err != nil {
					t.Fatal(err)
				}
				handle(ev, s)
			}
		}
		for id, at := range doneAt {
			if at >= 0 && at <= s {
				delete(doneAt, id)
				ev, err := e.RequestDone(now, id)
				if err != nil {
					t.Fatal(err)
				}
				handle(ev, s)
			}
		}
		for range load(s) {
			r := e.Route(now)
			if r.Started {
				readyAt[r.Instance] = s + 2
			}
			doneAt[r.Request] = -1 // pending until dispatched
			if r.Outcome == Served {
				doneAt[r.Request] = s + 1
				res.served++
			}
		}
		for id := range live {
			info, _ := e.Instance(id)
			if err := e.Observe(now, id, min(0.012*float64(info.InFlight), 1), float64(info.InFlight)); err != nil {
				t.Fatal(err)
			}
		}
		d := e.Tick(now)
		handle(d.Events, s)
		checkInvariants(t, e)
		st := e.Stats()
		res.peak = max(res.peak, st.Starting+st.Ready+st.Draining)
		res.final = st.Starting + st.Ready + st.Draining
		res.instanceSeconds += res.final
	}
	return res
}

// TestPoliciesCompareOnOneTrace runs the Cloud Run recommender and both
// baselines on the same step load, as the simulator will: each must absorb
// a 20× step without 429s under max instances and scale to zero after it.
func TestPoliciesCompareOnOneTrace(t *testing.T) {
	load := func(s int) int {
		switch {
		case s < 120:
			return 100
		case s < 420:
			return 2000
		default:
			return 0
		}
	}
	for _, tc := range []struct {
		name     string
		policy   func(Config) Policy
		min, max int // expected peak range
	}{
		{"cloudrun", func(c Config) Policy { return NewCloudRun(c) }, 40, 60},
		{"kpa", func(c Config) Policy { return NewKnativeKPA(c) }, 36, 60},
		{"hpa", func(c Config) Policy { return NewKubernetesHPA(c) }, 25, 60},
	} {
		cfg := Config{MaxInstances: 100}
		cfg.Policy = tc.policy(cfg)
		res := runTrace(t, cfg, 420+1800, load)
		t.Logf("%-8s peak %d instances, %d instance-seconds, served %d, rejected %d, final %d",
			tc.name, res.peak, res.instanceSeconds, res.served, res.rejected, res.final)
		if res.peak < tc.min || res.peak > tc.max || res.rejected != 0 || res.final != 0 {
			t.Errorf("%s: %+v, want peak in [%d, %d], no 429, zero at the end", tc.name, res, tc.min, tc.max)
		}
	}
}

var (
	_ Policy = (*CloudRun)(nil)
	_ Policy = (*KnativeKPA)(nil)
	_ Policy = (*KubernetesHPA)(nil)
)

func TestDriverAndStateNames(t *testing.T) {
	if DriverCPU.String() != "cpu" || DriverConcurrency.String() != "concurrency" || DriverACT.String() != "act" || DriverNone.String() != "none" {
		t.Error("driver names")
	}
	if Starting.String() != "starting" || Draining.String() != "draining" || InstanceState(9).String() != "InstanceState(9)" {
		t.Error("state names")
	}
	if Served.String() != "served" || Queued.String() != "queued" {
		t.Error("outcome names")
	}
	_ = time.Second
}
