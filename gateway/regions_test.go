package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
	redislimiter "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// madeUpRegions are the regions of the attack: made-up names, a
// name AWS's pattern would place in its partition that no region has,
// and an SDK endpoint pseudo-region.
func madeUpRegions() []string {
	var out []string
	for i := 1; i <= 100; i++ {
		out = append(out, fmt.Sprintf("zz-evade-%d", i))
	}
	return append(out, "us-east-7", "mars-north-1", "aws-global")
}

// regionsRig is a verifying gateway in front of ECS (throttled only),
// Cloud Map's registry and Service Quotas, all on one store.
type regionsRig struct {
	url     string
	buckets func() int // buckets in the throttling store
	state   func() int // keys of Cloud Map and Service Quotas (Redis), or -1
}

func newRegionsRig(t *testing.T, useRedis bool) regionsRig {
	t.Helper()
	creds, err := awsjson.ParseCredentials([]byte("[tenant]\naws_access_key_id = AKIDTENANT\naws_secret_access_key = tenant-secret\n"))
	if err != nil {
		t.Fatal(err)
	}
	var services []*quota.Service
	for _, name := range []string{"ecs", "cloudmap", "servicequotas"} {
		s, _ := quota.Preset(name)
		services = append(services, s)
	}
	cfg, err := quota.NewConfig(services, []quota.Override{
		{Service: "ecs", Account: "AKIDTENANT", Category: "cluster-read", Limit: mustLimit(t, 10, 0.01)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rig := regionsRig{state: func() int { return -1 }}
	var lim limiter.Limiter
	var cmOpts cloudmap.Options
	var sqOpts servicequotas.Options
	if useRedis {
		srv := redistest.Start(t)
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		t.Cleanup(func() { client.Close() })
		// Wide of the machine's load: a first take Redis answers late would
		// be decided closed (the store has not counted its nodes yet).
		lim = redislimiter.New(client, redislimiter.Options{Timeout: 2 * time.Second, Nodes: 1})
		cmOpts.Redis, sqOpts.Redis = client, client
		count := func(pattern string) int {
			keys, err := client.Keys(context.Background(), pattern).Result()
			if err != nil {
				t.Fatal(err)
			}
			return len(keys)
		}
		rig.buckets = func() int { return count("tg:*") }
		rig.state = func() int { return count("*") - count("tg:*") }
	} else {
		ms := memory.New(memory.Options{})
		lim, rig.buckets = ms, ms.Len
	}
	reg, err := cloudmap.New(cmOpts)
	if err != nil {
		t.Fatal(err)
	}
	sqOpts.Config = cfg
	quotas, err := servicequotas.New(sqOpts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Options{Config: cfg, Limiter: lim, Verifier: awsjson.NewVerifier(creds, awsjson.VerifierOptions{}),
		Handlers: map[string]http.Handler{"cloudmap": reg, "servicequotas": quotas}, Limits: quotas})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	rig.url = srv.URL
	return rig
}

func mustLimit(t *testing.T, capacity int64, perSecond float64) bucket.Limit {
	t.Helper()
	l, err := bucket.NewLimit(capacity, perSecond)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestMadeUpRegionsAreRefused repeats the attack: a verified
// tenant throttled in us-east-1 signs its next calls (the Go SDK, ECS,
// Cloud Map and Service Quotas) for made-up regions. Each gets AWS's
// answer for a region the endpoint does not serve, takes no token, and
// creates no bucket, namespace or quota request; the tenant stays
// throttled in us-east-1.
func TestMadeUpRegionsAreRefused(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			rig := newRegionsRig(t, store == "redis")
			ctx := context.Background()
			provider := credentials.NewStaticCredentialsProvider("AKIDTENANT", "tenant-secret", "")
			ecsIn := func(region string) *ecs.Client {
				return ecs.New(ecs.Options{Region: region, BaseEndpoint: aws.String(rig.url), Credentials: provider, Retryer: aws.NopRetryer{}})
			}
			for i := range 10 {
				if _, err := ecsIn("us-east-1").DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err != nil {
					t.Fatalf("call %d of the burst of 10: %v", i, err)
				}
			}
			if _, err := ecsIn("us-east-1").DescribeClusters(ctx, &ecs.DescribeClustersInput{}); errorCode(t, err) != "ThrottlingException" {
				t.Fatalf("the 11th call in us-east-1: %v", err)
			}
			buckets, state := rig.buckets(), rig.state()

			want := func(region string, err error) {
				t.Helper()
				msg := "Credential should be scoped to a valid region, not '" + region + "'. "
				if errorCode(t, err) != "InvalidSignatureException" || !strings.Contains(err.Error(), msg) {
					t.Errorf("%s: %v, want InvalidSignatureException %q", region, err, msg)
				}
			}
			// As in the issue: 1,000 signed DescribeClusters over 100
			// made-up regions (and the rest), against an allowance of 10.
			for _, region := range madeUpRegions() {
				for range 10 {
					_, err := ecsIn(region).DescribeClusters(ctx, &ecs.DescribeClustersInput{})
					want(region, err)
				}
				cm := sd.New(sd.Options{Region: region, BaseEndpoint: aws.String(rig.url), Credentials: provider, Retryer: aws.NopRetryer{}})
				_, err := cm.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("evade")})
				want(region, err)
				q := sq.New(sq.Options{Region: region, BaseEndpoint: aws.String(rig.url), Credentials: provider, Retryer: aws.NopRetryer{}})
				_, err = q.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{
					ServiceCode: aws.String("ecs"), QuotaCode: aws.String(servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)), DesiredValue: aws.Float64(1000)})
				want(region, err)
			}
			if got := rig.buckets(); got != buckets {
				t.Errorf("buckets: %d before the made-up regions, %d after", buckets, got)
			}
			if got := rig.state(); got != state {
				t.Errorf("Cloud Map and Service Quotas keys: %d before the made-up regions, %d after", state, got)
			}
			if _, err := ecsIn("us-east-1").DescribeClusters(ctx, &ecs.DescribeClustersInput{}); errorCode(t, err) != "ThrottlingException" {
				t.Errorf("us-east-1 after the made-up regions: %v", err)
			}
			// The tenant's real regions are served: no namespace was made
			// by the refused calls, and a new one can be.
			cm := sd.New(sd.Options{Region: "eu-west-1", BaseEndpoint: aws.String(rig.url), Credentials: provider, Retryer: aws.NopRetryer{}})
			if out, err := cm.ListNamespaces(ctx, &sd.ListNamespacesInput{}); err != nil || len(out.Namespaces) != 0 {
				t.Errorf("eu-west-1 namespaces: %v %v", out, err)
			}
			if _, err := cm.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("real")}); err != nil {
				t.Errorf("a namespace in eu-west-1: %v", err)
			}
		})
	}
}

// TestUnsignedMadeUpRegionsAreRefused: without verification, a request
// that only claims a region (its Authorization header unverified) is
// refused the same way, and the native /v1/take refuses the region as a
// field, both before any bucket is made.
func TestUnsignedMadeUpRegionsAreRefused(t *testing.T) {
	ms := memory.New(memory.Options{})
	_, srv := newTestServer(t, nil, Options{Limiter: ms})
	ctx := context.Background()
	for _, region := range madeUpRegions() {
		_, err := ecsClient(srv.URL, "AKIDANY", region, aws.NopRetryer{}).DescribeClusters(ctx, &ecs.DescribeClustersInput{})
		if errorCode(t, err) != "InvalidSignatureException" || !strings.Contains(err.Error(), "not '"+region+"'") {
			t.Errorf("%s: %v", region, err)
		}
		body := `{"service":"ecs","account":"111122223333","region":"` + region + `","action":"DescribeClusters"}`
		resp, err := http.Post(srv.URL+"/v1/take", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !bytes.Contains(b, []byte(`"region"`)) || !bytes.Contains(b, []byte("is not served")) {
			t.Errorf("/v1/take in %s: %d %s", region, resp.StatusCode, b)
		}
		batch := `{"requests":[{"service":"ecs","account":"1","region":"us-east-1","action":"DescribeClusters"},` +
			`{"service":"ecs","account":"1","region":"` + region + `","action":"DescribeClusters"}]}`
		resp, err = http.Post(srv.URL+"/v1/take/batch", "application/json", strings.NewReader(batch))
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !bytes.Contains(b, []byte("requests[1].region")) {
			t.Errorf("/v1/take/batch in %s: %d %s", region, resp.StatusCode, b)
		}
	}
	if n := ms.Len(); n != 0 {
		t.Errorf("%d buckets after requests only for made-up regions", n)
	}
	if _, err := ecsClient(srv.URL, "AKIDANY", "ap-southeast-2", aws.NopRetryer{}).DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err != nil {
		t.Errorf("a real region: %v", err)
	}
}
