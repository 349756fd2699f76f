package liveview_test

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/quota"
)

func Example() {
	r := liveview.New(liveview.Options{})
	reads := r.Series("ecs", "cluster-read")
	hot := quota.Key{Service: "ecs", Account: "123456789012", Region: "us-east-1", Category: "cluster-read"}

	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for s := 1; s <= 2; s++ {
		for i := range 30 {
			allowed := i < 20
			reads.Count(allowed)
			if !allowed {
				r.Throttled(hot)
			}
		}
		r.Tick(start.Add(time.Duration(s) * time.Second)) // Run does this once a second
	}

	d := r.Decisions(time.Time{})
	fmt.Println("allowed per second:", d.Series[0].Allowed, "throttled:", d.Series[0].Throttled)
	keys, window, _ := r.Hot(1)
	fmt.Printf("hottest over %v: %s, %.0f throttles/s\n", window, keys[0].Key, keys[0].PerSecond)
	// Output:
	// allowed per second: [20 20] throttled: [10 10]
	// hottest over 2s: {ecs/123456789012}:us-east-1:cluster-read, 10 throttles/s
}
