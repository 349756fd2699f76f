package sim_test

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/retry"
	"github.com/tollgate/tollgate/sim"
)

// A herd of 100 ECS DescribeClusters calls at the same instant, retried with
// the default schedule (exponential backoff, additive jitter) stripped of its jitter: the cluster-read bucket (50
// tokens, 20 per second) admits 50 at once, 20 of the retries at 1 s and the
// last 30 at 3 s.
func Example() {
	res, err := sim.Run(sim.Scenario{
		Duration: 10 * time.Second,
		Clients:  []sim.Clients{{Burst: 100}},
		Retry:    sim.Retry{Schedule: sim.WithoutJitter(retry.DefaultSchedule())},
		Backend:  sim.Backend{None: true},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range res.Seconds[:4] {
		fmt.Printf("%v: attempts %d, admitted %d, throttled %d\n", s.Start, s.Attempts, s.Admitted, s.Throttled)
	}
	sum := res.Summary
	fmt.Printf("limit %v: %d calls, %d retries, p99 %v\n", res.Limit, sum.Calls, sum.Retries, sum.P99Latency)
	// Output:
	// 0s: attempts 100, admitted 50, throttled 50
	// 1s: attempts 50, admitted 20, throttled 30
	// 2s: attempts 0, admitted 0, throttled 0
	// 3s: attempts 30, admitted 30, throttled 0
	// limit 50/20: 100 calls, 80 retries, p99 3s
}

// A study from the built-in presets: 500 simultaneous calls retried without
// jitter, with additive jitter and with full jitter.
func ExamplePreset() {
	st, err := sim.Preset("thundering-herd")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, sc := range st.Runs {
		fmt.Println(sc.Name)
	}
	// Output:
	// no-jitter
	// additive-jitter
	// full-jitter
}

// A Player plays recorded arrivals: here 60 calls at one instant on ECS's
// cluster-read bucket (50 tokens, 20 per second), without retries.
func ExamplePlayer() {
	p, err := sim.NewPlayer([]sim.Retry{{Disabled: true}}, 1)
	if err != nil {
		panic(err)
	}
	throttled := 0
	p.Observe = func(a sim.Attempt) {
		if !a.Allowed {
			throttled++
		}
	}
	b := p.AddBucket(bucket.MustLimit(50, 20))
	for range 60 {
		if err := p.Arrive(1_800_000_000e9, b, 0); err != nil {
			panic(err)
		}
	}
	p.Finish()
	fmt.Println("throttled:", throttled)
	// Output: throttled: 10
}

// Ten requests a second for a minute, each running 500 ms, on instances
// of two concurrent requests that start in 2 s: the requests of the first
// seconds wait for cold starts, and on-demand scaling starts more
// instances (13) than the steady load of 5 concurrent requests needs.
func ExampleScaler() {
	s, err := sim.NewScaler(sim.Backend{ColdStart: 2 * time.Second, Autoscale: autoscale.Config{MaxConcurrency: 2}}, time.Minute, nil)
	if err != nil {
		panic(err)
	}
	for i := range 600 {
		if err := s.Arrive(time.Duration(i)*100*time.Millisecond, 500*time.Millisecond); err != nil {
			panic(err)
		}
	}
	st, err := s.Finish()
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d requests, %d served, %d waited (p99 %v), %d cold starts, peak %d instances\n",
		st.Requests, st.Served, st.Pending, st.WaitP99, st.ColdStarts, st.PeakInstances)
	// Output: 600 requests, 600 served, 35 waited (p99 2s), 13 cold starts, peak 13 instances
}
