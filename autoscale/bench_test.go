package autoscale

import (
	"testing"
	"time"
)

// benchEngine returns an engine with n ready instances and ten minutes of
// per-second history. The first n/2 instances run at 60 % CPU, the rest at
// 20 % with one request each: the CPU driver holds about two thirds of them
// as recommended and the rest are surplus that the scale-down rules examine
// on every decision but keep (utilisation 20 %, not idle).
func benchEngine(b *testing.B, n int) (*Engine, []InstanceID, []float64, time.Time) {
	b.Helper()
	e, err := New(Config{MaxInstances: n})
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	e.clock(now)
	ids := make([]InstanceID, n)
	cpu := make([]float64, n)
	for i := range ids {
		in := e.startInstance(now)
		if _, err := e.InstanceReady(now, in.id); err != nil {
			b.Fatal(err)
		}
		ids[i] = in.id
		cpu[i] = 0.6
		if i >= n/2 {
			cpu[i] = 0.2
			e.nextRequest++
			e.serve(now, e.nextRequest, in)
		}
	}
	for s := 0; s < span10m; s++ {
		now = now.Add(time.Second)
		for i, id := range ids {
			if err := e.Observe(now, id, cpu[i], 1); err != nil {
				b.Fatal(err)
			}
		}
		e.Tick(now)
	}
	if st := e.Stats(); st.Ready != n || st.Recommended == n {
		b.Fatalf("setup: %+v, want %d ready with surplus", st, n)
	}
	return e, ids, cpu, now
}

// BenchmarkDecision1000 times one Tick over 1,000 ready instances with full
// 10-minute windows; the per-second samples between decisions are not timed.
func BenchmarkDecision1000(b *testing.B) {
	e, ids, cpu, now := benchEngine(b, 1000)
	want := e.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		now = now.Add(time.Second)
		for i, id := range ids {
			e.Observe(now, id, cpu[i], 1)
		}
		b.StartTimer()
		e.Tick(now)
	}
	b.StopTimer()
	if got := e.Stats(); got != want {
		b.Fatalf("not steady: %+v, then %+v", want, got)
	}
}

// BenchmarkSecond1000 times one whole second of the engine over 1,000
// instances: a sample from every instance into its windows, then the Tick.
func BenchmarkSecond1000(b *testing.B) {
	e, ids, cpu, now := benchEngine(b, 1000)
	want := e.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(time.Second)
		for i, id := range ids {
			e.Observe(now, id, cpu[i], 1)
		}
		e.Tick(now)
	}
	b.StopTimer()
	if got := e.Stats(); got != want {
		b.Fatalf("not steady: %+v, then %+v", want, got)
	}
}

// BenchmarkRoute times routing a request and finishing it on a service of
// 100 ready instances.
func BenchmarkRoute(b *testing.B) {
	e, _, _, now := benchEngine(b, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := e.Route(now)
		if _, err := e.RequestDone(now, r.Request); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteQueued times routing a request that finds every slot of
// 100 ready instances (80 each) taken and is queued on the one where a
// slot is expected soonest, then abandoning it: the expected-wait path.
func BenchmarkRouteQueued(b *testing.B) {
	e, _, _, now := benchEngine(b, 100)
	var last RequestID
	for r := e.Route(now); r.Outcome == Served; r = e.Route(now) {
		last = r.Request
	}
	// One request seen to take 10 ms: a slot is expected well within a
	// cold start, so requests queue on the ready instances.
	if _, err := e.RequestDone(now.Add(10*time.Millisecond), last); err != nil {
		b.Fatal(err)
	}
	now = now.Add(20 * time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := e.Route(now)
		if r.Outcome != Queued || r.Started {
			b.Fatalf("route: %+v, want queued on a ready instance", r)
		}
		if _, err := e.RequestDone(now, r.Request); err != nil {
			b.Fatal(err)
		}
	}
}
