package pool

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

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
