package autoscale_test

import (
	"fmt"
	"log"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// Example drives the engine through one request's life on a fake clock:
// scale from zero on demand, a CPU-driven scale-up, then the request ends.
func Example() {
	e, err := autoscale.New(autoscale.Config{MaxInstances: 10})
	if err != nil {
		log.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	// With no instance, only a request starts one: it waits on it.
	r := e.Route(t0)
	fmt.Printf("request %d %v on instance %d, started on demand: %v\n", r.Request, r.Outcome, r.Instance, r.Started)

	// The instance is ready after a 2 s cold start and takes the request.
	ev, _ := e.InstanceReady(t0.Add(2*time.Second), r.Instance)
	fmt.Printf("dispatched: %v\n", ev.Dispatched)

	// It reports 0.9 cores used: (0.9 / 1 CPU) / 60 % target needs 1.5
	// instances, rounded up to 2.
	now := t0.Add(3 * time.Second)
	if err := e.Observe(now, r.Instance, 0.9, 1); err != nil {
		log.Fatal(err)
	}
	d := e.Tick(now)
	fmt.Printf("recommend %d (driver %v), start %v\n", d.Count, d.Driver, d.Started)

	// The request finishes; the slot is free again.
	if _, err := e.RequestDone(t0.Add(4*time.Second), r.Request); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", e.Stats())
	// Output:
	// request 1 queued on instance 1, started on demand: true
	// dispatched: [{1 1}]
	// recommend 2 (driver cpu), start [2]
	// {Starting:1 Ready:1 Draining:0 InFlight:0 Pending:0 Recommended:2}
}

// ExampleCloudRun_Recommend shows the tolerance band and the rounding up.
func ExampleCloudRun_Recommend() {
	p := autoscale.NewCloudRun(autoscale.Config{}) // 60 % CPU target, 1 CPU per instance
	for _, m := range []autoscale.Metrics{
		{Current: 10, CPU1m: 6.5},  // 65 %: inside 54 %–66 %, kept
		{Current: 10, CPU1m: 5.3},  // 53 %: 5.3 / 0.6 = 8.8 → 9
		{Current: 3, CPU1m: 2.46},  // 82 %: 2.46 / 0.6 = 4.1 → 5
		{Current: 10, CPU1m: 0.05}, // 0.5 %: 0.08 → 1
	} {
		r := p.Recommend(m)
		fmt.Printf("%d at %g cores → %d (%v, held %v)\n", m.Current, m.CPU1m, r.Count, r.Driver, r.Held)
	}
	// Output:
	// 10 at 6.5 cores → 10 (cpu, held true)
	// 10 at 5.3 cores → 9 (cpu, held false)
	// 3 at 2.46 cores → 5 (cpu, held false)
	// 10 at 0.05 cores → 1 (cpu, held false)
}

// ExampleEngine_InstanceExited: the only instance crashes with one request
// running and another waiting for it. The running one fails (the caller
// answers it 502); the waiting one gets a replacement started on demand.
func ExampleEngine_InstanceExited() {
	e, err := autoscale.New(autoscale.Config{MaxConcurrency: 1, MaxInstances: 1, IdleTimeout: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := e.Route(t0)
	if _, err := e.InstanceReady(t0.Add(time.Second), running.Instance); err != nil {
		log.Fatal(err)
	}
	waiting := e.Route(t0.Add(time.Second)) // at max instances: waits for instance 1
	fmt.Printf("request %d %v, request %d %v on instance %d\n",
		running.Request, running.Outcome, waiting.Request, waiting.Outcome, waiting.Instance)

	ev, err := e.InstanceExited(t0.Add(2*time.Second), running.Instance)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("answer 502: %v; start: %v\n", ev.Failed, ev.Started)
	info, _ := e.Instance(ev.Started[0])
	fmt.Printf("instance %d %v with %d queued\n", info.ID, info.State, info.Queued)
	// Output:
	// request 1 queued, request 2 queued on instance 1
	// answer 502: [1]; start: [2]
	// instance 2 starting with 1 queued
}
