package limiter_test

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
)

// A batch decides many takes in one call; DescribeClusters and ListClusters
// draw from one cluster-read bucket.
func Example() {
	var l limiter.Limiter = memory.New(memory.Options{})
	clusterRead := bucket.MustLimit(50, 20)
	key := "{ecs/123456789012}:us-east-1:cluster-read"

	reqs := []limiter.Request{
		{Key: key, Limit: clusterRead, Tokens: 30}, // DescribeClusters ×30
		{Key: key, Limit: clusterRead, Tokens: 20}, // ListClusters ×20
		{Key: key, Limit: clusterRead, Tokens: 1},  // one more
	}
	out := make([]bucket.Decision, len(reqs))
	if err := l.TakeBatch(context.Background(), reqs, out); err != nil {
		panic(err)
	}
	for _, d := range out {
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 20
	// true 0
	// false 0
}
