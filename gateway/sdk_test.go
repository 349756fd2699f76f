package gateway

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	sdtypes "github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
)

// newTestServer starts a gateway on the embedded defaults and a random
// loopback port. With a clock, the memory store reads it; else real time.
func newTestServer(t *testing.T, clock *limitertest.Clock, opts Options) (*Gateway, *httptest.Server) {
	t.Helper()
	if opts.Limiter == nil {
		mo := memory.Options{}
		if clock != nil {
			mo.Now = clock.Now
		}
		opts.Limiter = memory.New(mo)
	}
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

func ecsClient(url, accessKey, region string, retryer aws.Retryer) *ecs.Client {
	o := ecs.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, "secret", ""),
	}
	if retryer != nil {
		o.Retryer = retryer
	}
	return ecs.New(o)
}

// errorCode returns the AWS error code of err, or "" for success.
func errorCode(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("not an AWS API error: %v", err)
	}
	return apiErr.ErrorCode()
}

func TestSDKDescribeClustersBurstAdmits50(t *testing.T) {
	clock := limitertest.NewClock() // frozen: no refill during the burst
	_, srv := newTestServer(t, clock, Options{})
	client := ecsClient(srv.URL, "AKIDBURST", "us-east-1", aws.NopRetryer{})
	ctx := context.Background()
	ok, throttled := 0, 0
	for range 60 {
		_, err := client.DescribeClusters(ctx, &ecs.DescribeClustersInput{})
		switch code := errorCode(t, err); code {
		case "":
			ok++
		case "ThrottlingException":
			throttled++
			var apiErr smithy.APIError
			errors.As(err, &apiErr)
			if apiErr.ErrorMessage() != "Rate exceeded" {
				t.Errorf("message = %q, want Rate exceeded", apiErr.ErrorMessage())
			}
		default:
			t.Fatalf("unexpected error code %q: %v", code, err)
		}
	}
	if ok != 50 || throttled != 10 {
		t.Fatalf("60 DescribeClusters at one instant: %d ok, %d throttled; want 50 and 10", ok, throttled)
	}
	// 20 tokens a second: one second later 20 more pass.
	clock.Advance(time.Second)
	ok = 0
	for range 25 {
		if _, err := client.DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err == nil {
			ok++
		}
	}
	if ok != 20 {
		t.Fatalf("one second after draining, %d of 25 passed; want 20", ok)
	}
}

func TestSDKBurstWithRealClockAdmitsCapacityPlusRefill(t *testing.T) {
	_, srv := newTestServer(t, nil, Options{})
	client := ecsClient(srv.URL, "AKIDREAL", "us-east-1", aws.NopRetryer{})
	start := time.Now()
	ok := 0
	for range 100 {
		if _, err := client.DescribeClusters(context.Background(), &ecs.DescribeClustersInput{}); err == nil {
			ok++
		} else if code := errorCode(t, err); code != "ThrottlingException" {
			t.Fatalf("error code %q", code)
		}
	}
	elapsed := time.Since(start)
	bound := 50 + int(elapsed.Seconds()*20)
	if ok < 50 || ok > bound+1 {
		t.Fatalf("admitted %d in %v; want 50 plus what refilled (at most %d)", ok, elapsed, bound+1)
	}
}

func TestSDKClusterActionsShareOneBucket(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	client := ecsClient(srv.URL, "AKIDSHARE", "us-east-1", aws.NopRetryer{})
	ctx := context.Background()
	ok := 0
	for range 30 {
		if _, err := client.DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err == nil {
			ok++
		}
		if _, err := client.ListClusters(ctx, &ecs.ListClustersInput{}); err == nil {
			ok++
		}
	}
	if ok != 50 {
		t.Fatalf("30 DescribeClusters + 30 ListClusters: %d allowed, want 50", ok)
	}
	// Another category (ListTasks: cluster-resource-read) is untouched.
	if _, err := client.ListTasks(ctx, &ecs.ListTasksInput{}); err != nil {
		t.Fatalf("ListTasks throttled by the cluster-read bucket: %v", err)
	}
	// Another region and another account have their own buckets.
	for _, c := range []*ecs.Client{
		ecsClient(srv.URL, "AKIDSHARE", "eu-west-1", aws.NopRetryer{}),
		ecsClient(srv.URL, "AKIDOTHER", "us-east-1", aws.NopRetryer{}),
	} {
		if _, err := c.DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err != nil {
			t.Errorf("fresh region/account throttled: %v", err)
		}
	}
}

// tickingRetryer is the SDK's standard retryer, unchanged, except that
// each backoff it computes also moves the gateway's fake clock: by the
// backoff, and at least by minTick. The SDK draws each backoff at random
// from zero up (full jitter), so without the floor both of its retries fell
// within one refill interval about once in 6,000 runs and met an empty
// bucket; with it the outcome does not depend on the draw.
type tickingRetryer struct {
	*sdkretry.Standard
	clock   *limitertest.Clock
	minTick time.Duration
}

func (r tickingRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, err2 := r.Standard.RetryDelay(attempt, err)
	r.clock.Advance(max(d, r.minTick))
	return d, err2
}

func TestSDKDefaultRetryerSucceedsAfterThrottle(t *testing.T) {
	t.Parallel() // its own servers
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	ctx := context.Background()
	noRetry := ecsClient(srv.URL, "AKIDRETRY", "us-east-1", aws.NopRetryer{})
	for range 60 {
		noRetry.DescribeClusters(ctx, &ecs.DescribeClustersInput{})
	}
	if _, err := noRetry.DescribeClusters(ctx, &ecs.DescribeClustersInput{}); errorCode(t, err) != "ThrottlingException" {
		t.Fatalf("bucket not drained: %v", err)
	}
	var attempts atomic.Int32
	oneToken := 50 * time.Millisecond // DescribeClusters refills 20 tokens a second
	withRetry := ecsClient(srv.URL, "AKIDRETRY", "us-east-1", tickingRetryer{sdkretry.NewStandard(), clock, oneToken})
	_, err := withRetry.DescribeClusters(ctx, &ecs.DescribeClustersInput{}, func(o *ecs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("CountAttempts",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					attempts.Add(1)
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	})
	if err != nil {
		t.Fatalf("standard retryer did not get through: %v", err)
	}
	if attempts.Load() < 2 {
		t.Fatalf("%d attempts: the first should have been throttled", attempts.Load())
	}
}

// disableHostPrefix stops the SDK from adding "data-" to the endpoint host
// of DiscoverInstances, which a loopback endpoint cannot take.
func disableHostPrefix(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("DisableHostPrefix",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			return next.HandleInitialize(smithyhttp.DisableEndpointHostPrefix(ctx, true), in)
		}), middleware.Before)
}

func TestSDKCloudMapThrottleIsRequestLimitExceeded(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	client := sd.New(sd.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDMAP", "secret", ""),
		Retryer:      aws.NopRetryer{},
		APIOptions:   []func(*middleware.Stack) error{disableHostPrefix},
	})
	ctx := context.Background()
	in := &sd.DiscoverInstancesInput{NamespaceName: aws.String("ns"), ServiceName: aws.String("svc")}
	if _, err := client.DiscoverInstances(ctx, in); err != nil {
		t.Fatalf("first DiscoverInstances: %v", err)
	}
	// Drain the remaining 19,999 tokens in one native take.
	status, _ := postJSON(t, srv.URL+"/v1/take", `{"service":"cloudmap","account":"AKIDMAP","region":"us-east-1","action":"DiscoverInstances","tokens":19999}`)
	if status != 200 {
		t.Fatalf("draining take answered %d", status)
	}
	_, err := client.DiscoverInstances(ctx, in)
	var rle *sdtypes.RequestLimitExceeded
	if !errors.As(err, &rle) {
		t.Fatalf("throttled DiscoverInstances error = %T %v, want *types.RequestLimitExceeded", err, err)
	}
	clock.Advance(time.Millisecond) // 1,000/s: one token per millisecond
	if _, err := client.DiscoverInstances(ctx, in); err != nil {
		t.Fatalf("after 1 ms: %v", err)
	}
}
