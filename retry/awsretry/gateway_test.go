package awsretry_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/retry"
	"github.com/tollgate/tollgate/retry/awsretry"
)

// TestRetriesThroughTollgateServe drives a real ECS client with the seed
// policy's adapter against tollgate's own throttling server. The server's
// clock is fake and moves only when the retryer decides to wait, so the
// cluster-read bucket (20 tokens a second) has refilled exactly one token
// when the second attempt arrives.
func TestRetriesThroughTollgateServe(t *testing.T) {
	clock := limitertest.NewClock()
	g, err := gateway.New(gateway.Options{Limiter: memory.New(memory.Options{Now: clock.Now})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	newClient := func(r aws.Retryer, apiOpts ...func(*ecs.Options)) *ecs.Client {
		o := ecs.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(srv.URL),
			Credentials:  credentials.NewStaticCredentialsProvider("AKIDRETRY", "secret", ""),
			Retryer:      r,
		}
		for _, f := range apiOpts {
			f(&o)
		}
		return ecs.New(o)
	}
	ctx := context.Background()
	drain := newClient(aws.NopRetryer{})
	throttled := false
	for range 80 {
		if _, err := drain.DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err != nil {
			throttled = true
		}
	}
	if !throttled {
		t.Fatal("80 requests at once were never throttled")
	}

	var retries atomic.Int32
	r := awsretry.New(
		retry.WithSchedule(retry.Constant(time.Millisecond)),
		retry.WithDeadline(10*time.Second),
		retry.OnRetry(func(int, time.Duration, error) {
			retries.Add(1)
			clock.Advance(50 * time.Millisecond) // one token at 20/s
		}),
	)
	client := newClient(r, func(o *ecs.Options) { o.APIOptions = append(o.APIOptions, r.AddMiddleware) })
	if _, err := client.ListClusters(ctx, &ecs.ListClustersInput{}); err != nil {
		t.Fatalf("the default policy's retryer did not get through tollgate: %v", err)
	}
	if got := retries.Load(); got != 1 {
		t.Fatalf("%d retries, want exactly 1 (throttled once, then one token refilled)", got)
	}
}
