package servicequotas_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// An increase approved on node A changes node B's decisions (B only polls
// Redis), and both nodes' successors, built afresh on the same Redis as
// after a restart, apply it from their first decision.
func TestRedisApprovalReachesEveryNode(t *testing.T) {
	srv := redistest.Start(t)
	clock := limitertest.NewClock()
	newRedisNode := func() *node {
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		t.Cleanup(func() { client.Close() })
		return newNode(t, memory.New(memory.Options{Now: clock.Now}), servicequotas.Options{Redis: client, Now: clock.Now})
	}
	a, b := newRedisNode(), newRedisNode()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	burstCode := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	key := quota.Key{Service: "ecs", Account: "AKIDSHARED", Region: "us-east-1", Category: "cluster-read"}
	if got := burst(t, b.ecs("AKIDSHARED"), 80); got != 50 {
		t.Fatalf("node b before: %d of 80, want 50", got)
	}
	out, err := a.quotas("AKIDSHARED").RequestServiceQuotaIncrease(context.Background(), &sq.RequestServiceQuotaIncreaseInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burstCode), DesiredValue: aws.Float64(100)})
	if err != nil {
		t.Fatal(err)
	}
	// Node b sees the pending request too: it is in Redis.
	if _, err := b.quotas("AKIDSHARED").GetRequestedServiceQuotaChange(context.Background(),
		&sq.GetRequestedServiceQuotaChangeInput{RequestId: out.RequestedQuota.Id}); err != nil {
		t.Fatalf("node b: %v", err)
	}
	status, body := a.admin(t, "POST", "/v1/admin/servicequotas/requests/"+aws.ToString(out.RequestedQuota.Id)+"/approve", `{"reason":"ok"}`)
	if status != 200 {
		t.Fatalf("approve on a: %d %s", status, body)
	}
	approved := time.Now()
	// Run polls every 200 ms; the bound here is wide for a loaded machine.
	for b.svc.Limit(key, quota.Default().Services()[0].Categories[1].Limit).Capacity() != 100 {
		if time.Since(approved) > 5*time.Second {
			t.Fatal("node b did not apply the approval within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("node b applied the approval %v after node a", time.Since(approved).Round(time.Millisecond))
	clock.Advance(10 * time.Second)
	if got := burst(t, b.ecs("AKIDSHARED"), 150); got != 100 {
		t.Fatalf("node b after: %d of 150, want 100", got)
	}

	// Restart: new nodes on the same Redis, before any poll.
	c := newRedisNode()
	if err := c.svc.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if got := burst(t, c.ecs("AKIDSHARED"), 150); got != 100 {
		t.Fatalf("restarted node: %d of 150, want 100", got)
	}
	if status, body := c.admin(t, "GET", "/v1/admin/servicequotas/applied", ""); status != 200 || !strings.Contains(body, burstCode) {
		t.Fatalf("applied on the restarted node: %d %s", status, body)
	}
}

// A reload keeps approved values, and they win over the file's override
// for the same key.
func TestReloadKeepsApprovedValues(t *testing.T) {
	clock := limitertest.NewClock()
	n := newNode(t, memory.New(memory.Options{Now: clock.Now}), servicequotas.Options{Now: clock.Now,
		Policy: servicequotas.Policy{Rules: []servicequotas.Rule{{Burst: servicequotas.Bounds{AutoApproveUpTo: 1000}}}}})
	burstCode := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	if _, err := n.quotas("AKIDRELOAD").RequestServiceQuotaIncrease(context.Background(), &sq.RequestServiceQuotaIncreaseInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burstCode), DesiredValue: aws.Float64(120)}); err != nil {
		t.Fatal(err)
	}
	key := quota.Key{Service: "ecs", Account: "AKIDRELOAD", Region: "us-east-1", Category: "cluster-read"}
	ecsSvc, _ := quota.Preset("ecs")
	sqSvc, _ := quota.Preset("servicequotas")
	override := quota.Override{Service: "ecs", Account: "AKIDRELOAD", Category: "cluster-read", Limit: mustLimit(t, 300, 7)}
	cfg, err := quota.NewConfig([]*quota.Service{ecsSvc, sqSvc}, []quota.Override{override}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.svc.SetConfig(cfg, servicequotas.Policy{}); err != nil {
		t.Fatal(err)
	}
	fileLimit, _ := cfg.Limit(key)
	got := n.svc.Limit(key, fileLimit)
	// The approved burst wins; the rate, not increased, is the file's.
	if got.Capacity() != 120 || got.RefillPerSecond() != 7 {
		t.Fatalf("after reload: %v, want capacity 120 (approved) and 7/s (the file's override)", got)
	}
	q, err := n.quotas("AKIDRELOAD").GetServiceQuota(context.Background(), &sq.GetServiceQuotaInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Rate))})
	if err != nil || aws.ToFloat64(q.Quota.Value) != 7 {
		t.Fatalf("rate after reload: %+v %v", q, err)
	}
}

// A Redis store of an earlier release (one JSON document) is moved into
// the per-request keys at the first Refresh: its approved value applies,
// its requests keep their status and reason, and the document is kept
// aside.
func TestRedisLegacyStateIsMigrated(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	burstCode := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	rateCode := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Rate)
	legacy := `{"version":7,"requests":[
{"id":"11111111-1111-1111-1111-111111111111","account":"AKIDOLD","region":"us-east-1","service":"ecs","quota":"` + burstCode + `","desired":120,"status":"APPROVED","reason":"launch week","created":1000,"updated":2000},
{"id":"22222222-2222-2222-2222-222222222222","account":"AKIDOLD","region":"us-east-1","service":"ecs","quota":"` + rateCode + `","desired":40,"status":"PENDING","created":3000,"updated":3000}],
"applied":{"AKIDOLD|us-east-1|ecs|` + burstCode + `":120}}`
	ctx := context.Background()
	if err := client.Set(ctx, "tollgate:servicequotas:state", legacy, 0).Err(); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, memory.New(memory.Options{}), servicequotas.Options{Redis: client})
	if err := n.svc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	key := quota.Key{Service: "ecs", Account: "AKIDOLD", Region: "us-east-1", Category: "cluster-read"}
	if got := n.svc.Limit(key, quota.Default().Services()[0].Categories[1].Limit).Capacity(); got != 120 {
		t.Fatalf("migrated burst: %d, want 120", got)
	}
	status, body := n.admin(t, "GET", "/v1/admin/servicequotas/requests?account=AKIDOLD", "")
	if status != 200 || !strings.Contains(body, `"reason":"launch week"`) || !strings.Contains(body, `"updated":2000`) || !strings.Contains(body, `"PENDING"`) {
		t.Fatalf("migrated requests: %d %s", status, body)
	}
	out, err := n.quotas("AKIDOLD").GetRequestedServiceQuotaChange(ctx, &sq.GetRequestedServiceQuotaChangeInput{RequestId: aws.String("22222222-2222-2222-2222-222222222222")})
	if err != nil || out.RequestedQuota.Status != "PENDING" {
		t.Fatalf("migrated pending request: %+v %v", out, err)
	}
	if status, body := n.admin(t, "POST", "/v1/admin/servicequotas/requests/22222222-2222-2222-2222-222222222222/approve", `{"reason":"ok"}`); status != 200 {
		t.Fatalf("approve the migrated request: %d %s", status, body)
	}
	if client.Exists(ctx, "tollgate:servicequotas:state").Val() != 0 || client.Get(ctx, "tollgate:servicequotas:state:migrated").Val() != legacy {
		t.Fatal("the legacy document is not moved aside")
	}
}

// TestRedisLegacyStateWaitsForAConfigThatServesServiceQuotas: a node
// whose config has no Service Quotas API neither moves the legacy
// document nor logs about it; once a reload serves the API, it does.
func TestRedisLegacyStateWaitsForAConfigThatServesServiceQuotas(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	legacy := `{"version":1,"requests":[],"applied":{}}`
	if err := client.Set(ctx, "tollgate:servicequotas:state", legacy, 0).Err(); err != nil {
		t.Fatal(err)
	}
	ecsSvc, _ := quota.Preset("ecs")
	ecsOnly, err := quota.NewConfig([]*quota.Service{ecsSvc}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	svc, err := servicequotas.New(servicequotas.Options{Config: ecsOnly, Redis: client, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if client.Exists(ctx, "tollgate:servicequotas:state").Val() != 1 || strings.Contains(logs.String(), "legacy") {
		t.Fatalf("without Service Quotas in the config the legacy document was moved, or logged:\n%s", logs.String())
	}
	if err := svc.SetConfig(testConfig(t), servicequotas.Policy{}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if client.Exists(ctx, "tollgate:servicequotas:state").Val() != 0 || client.Get(ctx, "tollgate:servicequotas:state:migrated").Val() != legacy {
		t.Fatal("once the config serves Service Quotas, the legacy document is not moved aside")
	}
}
