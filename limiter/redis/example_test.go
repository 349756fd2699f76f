package redis_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter/redis"
)

// Two gateway nodes share ECS's DescribeClusters bucket (50 at once, 20 per
// second) through one Redis. It needs a Redis server at REDIS_URL, so it is
// compiled but not run by go test.
func Example() {
	url := os.Getenv("REDIS_URL") // e.g. redis://localhost:6379/0
	var nodes []*redis.Store
	for range 2 {
		client, err := redis.NewClient(url)
		if err != nil {
			log.Fatal(err)
		}
		defer client.Close()
		store := redis.New(client, redis.Options{FailurePolicy: redis.FailOpen, DenyCache: true})
		defer store.Close()
		nodes = append(nodes, store)
	}
	ctx := context.Background()
	key := "{ecs/123456789012}:us-east-1:cluster-read"
	limit := bucket.MustLimit(50, 20)
	allowed := 0
	for i := range 60 {
		d, err := nodes[i%2].Take(ctx, key, limit, 1)
		if err != nil {
			log.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	fmt.Println("allowed by both nodes together:", allowed) // 50 (+1 if a token arrived meanwhile)
	fmt.Println("decided by Redis:", nodes[0].Stats().Redis+nodes[1].Stats().Redis)
}

// NewClient turns a store URL into a go-redis client of the right kind;
// it does not connect until first used.
func ExampleNewClient() {
	for _, url := range []string{
		"redis://:secret@localhost:6379/2",
		"rediss+cluster://10.0.0.1:7000?addr=10.0.0.2:7000",
		"redis+sentinel://10.0.0.1:26379?master_name=tollgate",
	} {
		client, err := redis.NewClient(url)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%T\n", client)
		client.Close()
	}
	_, err := redis.NewClient("memcached://localhost")
	fmt.Println(err)
	// Output:
	// *redis.Client
	// *redis.ClusterClient
	// *redis.Client
	// redis: invalid store URL: scheme "memcached": want redis, rediss, unix, redis+cluster or redis+sentinel
}

// Every bucket of one account shares the account's hash tag, so on Redis
// Cluster they live in one slot and a request's takes are one script call.
func ExampleStore_Key() {
	client, _ := redis.NewClient("redis://localhost:6379")
	defer client.Close()
	store := redis.New(client, redis.Options{Timeout: 20 * time.Millisecond})
	defer store.Close()
	fmt.Println(store.Key("{ecs/123456789012}:us-east-1:cluster-read"))
	fmt.Println(store.Key("{ecs/123456789012}:us-east-1:cluster-modify"))
	// Output:
	// tg:{ecs/123456789012}:us-east-1:cluster-read
	// tg:{ecs/123456789012}:us-east-1:cluster-modify
}

// A config file names the failure policy; FailLocal is the zero value.
func ExampleParseFailurePolicy() {
	p, err := redis.ParseFailurePolicy("closed")
	fmt.Println(p, err)
	var zero redis.FailurePolicy
	fmt.Println(zero)
	// Output:
	// closed <nil>
	// local
}

// A readiness probe asks the store whether Redis answers. Under FailClosed
// a node whose Redis is down denies every take, so it is not ready; under
// FailLocal and FailOpen it is, once Redis has answered it. A node that
// has never reached its Redis is ready only under FailOpen. SetClientLogger sends go-redis's own lines
// (here, the failed dials) to a slog.Logger instead of standard error.
func ExampleStore_Health() {
	redis.SetClientLogger(slog.New(slog.DiscardHandler), 0)
	client, err := redis.NewClient("redis://127.0.0.1:1") // nothing listens on port 1
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	for _, p := range []redis.FailurePolicy{redis.FailClosed, redis.FailLocal, redis.FailOpen} {
		store := redis.New(client, redis.Options{FailurePolicy: p, Logger: slog.New(slog.DiscardHandler)})
		h := store.Health(context.Background())
		fmt.Println(h.Ready, h.Status)
		store.Close()
	}
	// Output:
	// false redis never reached (on failure: closed)
	// false redis never reached (on failure: local)
	// true redis never reached (on failure: open)
}
