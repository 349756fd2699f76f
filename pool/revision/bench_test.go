package revision

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// BenchmarkSlot times what the pool adds to the engine per request: take
// the lock, route, count the request on its instance, and release the slot
// (RequestDone, count it off, act on the events), on one ready instance,
// from parallel goroutines. Nothing is proxied.
func BenchmarkSlot(b *testing.B) {
	rv := newTestRevision(b, autoscale.Config{MaxConcurrency: 1000, MaxInstances: 1}, idleRunner{})
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
