package replay_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/replay/ctgen"
	"github.com/tollgate/tollgate/sim"
)

// A tenant bursting 300 DescribeClusters at once every minute, replayed
// for five minutes on ECS's cluster-read bucket (50 tokens, 20 a second)
// without retries: 250 throttled a minute, and a burst of 300 at the same
// rate admits them all.
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
	//   - {service: ecs, account: "111122223333", region: us-east-1, category: cluster-read, capacity: 300, refill_per_second: 20}
}
