package bucket_test

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// The ECS "cluster read" category: a burst of 50, then 20 per second.
func Example() {
	limit := bucket.MustLimit(50, 20)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	var state bucket.State // a new bucket is full
	allowed := 0
	for range 60 {
		var d bucket.Decision
		state, d = limit.Take(state, now, 1)
		if d.Allowed {
			allowed++
		}
	}
	_, d := limit.Take(state, now, 1)
	fmt.Println("allowed at once:", allowed)
	fmt.Println("next token in:", d.RetryAfter)
	fmt.Println("full again in:", d.ResetAfter)

	_, d = limit.Take(state, now.Add(time.Second), 0) // look without taking
	fmt.Println("tokens after 1s:", d.Remaining)
	// Output:
	// allowed at once: 50
	// next token in: 50ms
	// full again in: 2.5s
	// tokens after 1s: 20
}
