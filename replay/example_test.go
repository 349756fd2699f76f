package replay_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/replay/accessgen"
	"github.com/tollgate/tollgate/replay/ctgen"
	"github.com/tollgate/tollgate/sim"
)

// A tenant bursting 300 DescribeClusters at once every minute, replayed
// for five minutes on ECS's cluster-read bucket (50 tokens, 20 a second)
// without retries: 250 throttled a minute; a burst of 300 admits them all
// at 5 a second (300 tokens a minute), and at no slower rate.
func Example() {
	var log bytes.Buffer
	ctgen.Write(&log, ctgen.Spec{
		Start:    time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Duration: 5 * time.Minute,
		Tenants:  []ctgen.Tenant{{Account: "111122223333", Action: "DescribeClusters", Burst: 300, Every: time.Minute}},
	})
	in := replay.Input{Name: "burst.json", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(log.Bytes())), nil
	}}
	r, err := replay.Run([]replay.Input{in}, replay.Options{Groups: []replay.Group{{Name: "all", Retry: sim.Retry{Disabled: true}}}})
	if err != nil {
		panic(err)
	}
	b := r.Buckets[0]
	fmt.Printf("%s %s: %d calls, %d throttled, worst minute %s (%d)\n", b.Account, b.Category, b.Calls, b.Throttled, b.WorstMinute.Format("15:04"), b.WorstCount)
	r.WriteOverrides(os.Stdout)
	// Output:
	// 111122223333 cluster-read: 1500 calls, 1250 throttled, worst minute 12:00 (250)
	// overrides:
	//   - {service: ecs, account: "111122223333", region: us-east-1, category: cluster-read, capacity: 300, refill_per_second: 5}
}

// An Envoy access log of 4 requests a second for two minutes, each
// running 2 s, played through a service of one request an instance with
// max_instances 4, 8 and 16 side by side: the load needs 8 instances; at
// 4 nearly half the requests meet 429s, and at 16 the autoscaler's 60 %
// concurrency target runs more than 8.
func ExampleRunScale() {
	var log bytes.Buffer
	accessgen.Write(&log, accessgen.Spec{
		Format:  "envoy",
		Start:   time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Path:    "/api/orders",
		Phases:  []accessgen.Phase{{Duration: 2 * time.Minute, Rate: 4}},
		Service: []time.Duration{2 * time.Second},
	})
	in := replay.Input{Name: "envoy.log", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(log.Bytes())), nil
	}}
	r, err := replay.RunScale([]replay.Input{in}, replay.ScaleOptions{
		Services: []replay.ScaleService{{Name: "api", Route: &quota.Route{PathPrefix: "/api/"},
			Backend: sim.Backend{ColdStart: time.Second, Autoscale: autoscale.Config{MaxConcurrency: 1}}}},
		Sweep: replay.Sweep{Setting: "max_instances", Values: []int{4, 8, 16}},
	})
	if err != nil {
		panic(err)
	}
	for i, c := range r.Services[0].Columns {
		fmt.Printf("max_instances=%d: peak %d, %d served, %d 429s\n", r.Values[i], c.PeakInstances, c.Served, c.Rejected)
	}
	// Output:
	// max_instances=4: peak 4, 259 served, 221 429s
	// max_instances=8: peak 8, 480 served, 0 429s
	// max_instances=16: peak 14, 480 served, 0 429s
}
