package cloudmap_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/smithy-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// Two nodes on one Redis answer the same registry: what one registers the
// other discovers, and the revision only grows whichever node changes it,
// also under concurrent registrations from both.
func TestRedisNodesShareOneRegistry(t *testing.T) {
	srv := redistest.Start(t)
	clock := limitertest.NewClock()
	var nodes []*node
	for range 2 {
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		t.Cleanup(func() { client.Close() })
		nodes = append(nodes, newNode(t, clock, cloudmap.Options{Redis: client}))
	}
	a, b := nodes[0].client("AKIDREDIS"), nodes[1].client("AKIDREDIS")
	ctx := context.Background()
	_, svcID := setup(t, a)
	all := &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}

	rev := revision(t, b, "local", "web")
	for i, c := range []*sd.Client{a, b, a, b} {
		must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID),
			InstanceId: aws.String(fmt.Sprint("i-", i)), Attributes: map[string]string{"node": fmt.Sprint(i % 2)}})).get(t)
		for _, other := range []*sd.Client{a, b} {
			if r := revision(t, other, "local", "web"); r <= rev {
				t.Fatalf("after registration %d the revision is %d, not above %d", i, r, rev)
			}
		}
		rev = revision(t, a, "local", "web")
	}
	if ids, _ := discovered(t, b, all); !slices.Equal(ids, []string{"i-0", "i-1", "i-2", "i-3"}) {
		t.Fatalf("node b discovers %v", ids)
	}

	// 40 concurrent registrations, half on each node: none is lost.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		c := []*sd.Client{a, b}[i%2]
		wg.Go(func() {
			_, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID),
				InstanceId: aws.String(fmt.Sprint("c-", i)), Attributes: map[string]string{"k": "v"}})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	in := *all
	in.MaxResults = aws.Int32(1000)
	ids, r := discovered(t, a, &in)
	if len(ids) != 44 || r < rev+40 {
		t.Fatalf("after 40 concurrent registrations: %d instances, revision %d (was %d, want at least %d)", len(ids), r, rev, rev+40)
	}
	// The Go API (the pool's) shares the state too.
	if err := nodes[1].reg.DeregisterInstance(ctx, cloudmap.Scope{Account: "AKIDREDIS", Region: "us-east-1"}, "local", "web", "i-0"); err != nil {
		t.Fatal(err)
	}
	if ids, r2 := discovered(t, a, all); slices.Contains(ids, "i-0") || r2 <= r {
		t.Fatalf("after a Go-API deregistration on node b, node a discovers %v at revision %d (was %d)", ids, r2, r)
	}
}

// A registry on Redis keeps its state when the node's registry is rebuilt
// (as after a restart) from the same Redis.
func TestRedisStateOutlivesTheRegistry(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	sc := cloudmap.Scope{Account: "acct", Region: "us-east-1"}
	first, err := cloudmap.New(cloudmap.Options{Redis: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.RegisterInstance(ctx, sc, "local", "web", "i-1", map[string]string{"AWS_INSTANCE_PORT": "80"}); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{Redis: client})
	if ids, _ := discovered(t, n.client("acct"), &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}); !slices.Equal(ids, []string{"i-1"}) {
		t.Fatalf("a new registry on the same Redis discovers %v", ids)
	}
}

// On a Redis Cluster a scope's state and its revision share a slot, so
// updates (WATCH/MULTI on both) work.
func TestRedisCluster(t *testing.T) {
	t.Parallel() // its own redis-server and node
	srv := redistest.StartCluster(t)
	client := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{srv.Addr}})
	t.Cleanup(func() { client.Close() })
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{Redis: client})
	ctx := context.Background()
	if err := n.reg.RegisterInstance(ctx, cloudmap.Scope{Account: "AKIDCLUSTER", Region: "us-east-1"}, "local", "web", "i-1", nil); err != nil {
		t.Fatal(err)
	}
	c := n.client("AKIDCLUSTER")
	if ids, rev := discovered(t, c, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}); !slices.Equal(ids, []string{"i-1"}) || rev < 1 {
		t.Fatalf("discovered %v at revision %d", ids, rev)
	}
	if err := n.reg.DeregisterInstance(ctx, cloudmap.Scope{Account: "AKIDCLUSTER", Region: "us-east-1"}, "local", "web", "i-1"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := discovered(t, c, &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}); len(ids) != 0 {
		t.Fatalf("after deregistering, discovered %v (a stale cached state?)", ids)
	}
}

// While Redis stalls (SIGSTOP), DiscoverInstances answers from the state
// this node last read, within the store timeout, and writes fail fast
// with ServiceUnavailable (503), which the SDK retries; once Redis is
// back, answers are current again. (Before, DiscoverInstances blocked for
// about 10 s and answered 500.)
func TestRedisStallServesDiscoveryFromCache(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	n := newNode(t, limitertest.NewClock(), cloudmap.Options{Redis: client})
	c := n.client("AKIDSTALL")
	ctx := context.Background()
	_, svcID := setup(t, c)
	must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("i-1"),
		Attributes: map[string]string{"AWS_INSTANCE_PORT": "80"}})).get(t)
	all := &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}
	ids, rev := discovered(t, c, all)

	srv.Pause()
	t.Cleanup(srv.Resume) // before the server's Stop, which kills it either way
	start := time.Now()
	got, gotRev := discovered(t, c, all)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("DiscoverInstances during a stall took %v", took)
	}
	if !slices.Equal(got, ids) || gotRev != rev {
		t.Fatalf("during a stall: %v at revision %d, want the last state read, %v at %d", got, gotRev, ids, rev)
	}
	start = time.Now()
	_, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("i-2"),
		Attributes: map[string]string{"AWS_INSTANCE_PORT": "80"}})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("RegisterInstance during a stall took %v", took)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != 503 {
		t.Fatalf("RegisterInstance during a stall: %v, want HTTP 503", err)
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) != aws.TrueTernary {
		t.Fatalf("the SDK does not retry %v", err)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ServiceUnavailable" {
		t.Fatalf("RegisterInstance during a stall: %v, want ServiceUnavailable", err)
	}
	srv.Resume()
	must(c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: aws.String(svcID), InstanceId: aws.String("i-2"),
		Attributes: map[string]string{"AWS_INSTANCE_PORT": "80"}})).get(t)
	if got, _ := discovered(t, c, all); !slices.Equal(got, []string{"i-1", "i-2"}) {
		t.Fatalf("after the stall: %v", got)
	}
}

// A state older than MaxStale is not served: DiscoverInstances then fails
// with ServiceUnavailable like any other call.
func TestRedisStaleStateHasAnAge(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	clock := limitertest.NewClock()
	n := newNode(t, clock, cloudmap.Options{Redis: client, StoreTimeout: 300 * time.Millisecond, MaxStale: time.Minute})
	c := n.client("AKIDSTALE")
	setup(t, c)
	all := &sd.DiscoverInstancesInput{NamespaceName: aws.String("local"), ServiceName: aws.String("web")}
	discovered(t, c, all)
	srv.Pause()
	t.Cleanup(srv.Resume)
	discovered(t, c, all) // within MaxStale: answered
	clock.Advance(61 * time.Second)
	_, err := c.DiscoverInstances(context.Background(), all)
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ServiceUnavailable" {
		t.Fatalf("DiscoverInstances from a state older than MaxStale: %v, want ServiceUnavailable", err)
	}
}
