package pool

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// BenchmarkSlot times what the pool adds to the engine per request: take
// the lock, route, count the request on its instance, and release the slot
// (RequestDone, count it off, act on the events), on one ready instance,
// from parallel goroutines. Nothing is proxied.
func BenchmarkSlot(b *testing.B) {
	rv, err := newRevision("s", "s-1", autoscale.Config{MaxConcurrency: 1000, MaxInstances: 1}, &serverRunner{}, ServiceSpec{}.limits(), testLogger(nil), New(Options{}).m.revision("s", "s-1"))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	res := rv.eng.Route(now)
	in := &instance{id: res.Instance, stop: make(chan struct{})}
	rv.insts[res.Instance] = in
	if _, err := rv.eng.InstanceReady(now, res.Instance); err != nil {
		b.Fatal(err)
	}
	in.begin(now)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := time.Now()
			rv.mu.Lock()
			r := rv.eng.Route(t)
			if r.Outcome != autoscale.Served {
				rv.mu.Unlock()
				b.Fatalf("not served: %+v", r)
			}
			rv.insts[r.Instance].begin(t)
			rv.mu.Unlock()
			rv.finish(r.Request, in, nil)
		}
	})
}

// BenchmarkScaleFromZero times the first request of a service with no
// instance, through an in-process instance whose own start is a listen
// (microseconds): what remains is tollgate's overhead on a cold start
// (route, launch, readiness report, dispatch, first proxied connection).
func BenchmarkScaleFromZero(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		p := New(Options{})
		if err := p.Apply([]ServiceSpec{{Name: "s", Runner: &serverRunner{}, Engine: autoscale.Config{MaxInstances: 1}}}); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		h := p.Handler("s")
		b.StartTimer()
		start := time.Now()
		code, _, _ := getCtx(context.Background(), h, "/")
		total += time.Since(start)
		b.StopTimer()
		if code != 200 {
			b.Fatalf("status %d", code)
		}
		cancel()
		<-done
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/first-request")
}
