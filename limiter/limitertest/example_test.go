package limitertest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
)

// A store under test reads time from the suite's fake clock, which moves
// only when told. A store's own test runs the whole suite with
//
//	limitertest.Run(t, func(t *testing.T, c *limitertest.Clock) limiter.Limiter {
//		return memory.New(memory.Options{Now: c.Now})
//	})
func ExampleClock() {
	clock := limitertest.NewClock()
	store := memory.New(memory.Options{Now: clock.Now})
	limit := bucket.MustLimit(1, 1)

	d, _ := store.Take(context.Background(), "k", limit, 1)
	fmt.Println(d.Allowed)
	d, _ = store.Take(context.Background(), "k", limit, 1)
	fmt.Println(d.Allowed)
	clock.Advance(time.Second)
	d, _ = store.Take(context.Background(), "k", limit, 1)
	fmt.Println(d.Allowed)
	// Output:
	// true
	// false
	// true
}
