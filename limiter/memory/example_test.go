package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter/memory"
)

func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memory.New(memory.Options{Now: func() time.Time { return now }})
	discover := bucket.MustLimit(20000, 1000) // Cloud Map DiscoverInstances
	key := "{cloudmap/123456789012}:us-east-1:discover-instances"

	d, _ := store.Take(context.Background(), key, discover, 20000)
	fmt.Println("burst allowed:", d.Allowed)
	d, _ = store.Take(context.Background(), key, discover, 1)
	fmt.Println("next allowed:", d.Allowed, "retry after", d.RetryAfter)

	now = now.Add(time.Second)
	d, _ = store.Take(context.Background(), key, discover, 1000)
	fmt.Println("a second later, 1000 allowed:", d.Allowed)
	// Output:
	// burst allowed: true
	// next allowed: false retry after 1ms
	// a second later, 1000 allowed: true
}
