package servicequotas_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas/types"

	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// usageOf reads an account's buckets from a live view recorder, as a
// node does.
func usageOf(rec *liveview.Recorder) func(account, region string) []servicequotas.BucketUse {
	return func(account, region string) []servicequotas.BucketUse {
		var out []servicequotas.BucketUse
		for _, u := range rec.Usage(0, func(k quota.Key) bool { return k.Account == account && k.Region == region }).Keys {
			out = append(out, servicequotas.BucketUse{Service: u.Key.Service, Category: u.Key.Category, Throttled: u.Throttled > u.ErrorBound, Peak: u.Peak})
		}
		return out
	}
}

// newLiveNode is newNode with a live view recorder whose utilisation the
// Service Quotas API reports.
func newLiveNode(t *testing.T, clock *limitertest.Clock) (*node, *liveview.Recorder) {
	t.Helper()
	rec := liveview.New(liveview.Options{})
	cfg := testConfig(t)
	svc, err := servicequotas.New(servicequotas.Options{Config: cfg, Now: clock.Now, Usage: usageOf(rec)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Config: cfg, Limiter: memory.New(memory.Options{Now: clock.Now}), AdminToken: adminToken,
		Handlers: map[string]http.Handler{"servicequotas": svc}, Limits: svc, AdminHandlers: svc.AdminHandlers(), Live: rec})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return &node{srv: srv, svc: svc}, rec
}

// TestUtilizationReport: an account that burst past its cluster-read
// bucket sees both its quotas at 100%, one that used 5 of 50 tokens at
// 10%; pages, other accounts' reports and expired ones answer as the
// model says.
func TestUtilizationReport(t *testing.T) {
	clock := limitertest.NewClock()
	n, rec := newLiveNode(t, clock)
	ctx := context.Background()
	if got := burst(t, n.ecs("AKIDHOT"), 60); got != 50 {
		t.Fatalf("%d of 60 allowed, want 50", got)
	}
	burst(t, n.ecs("AKIDCALM"), 5)
	rec.Tick(clock.Now())

	report := func(c *sq.Client, max int32) []types.QuotaUtilizationInfo {
		t.Helper()
		start, err := c.StartQuotaUtilizationReport(ctx, &sq.StartQuotaUtilizationReportInput{})
		if err != nil {
			t.Fatal(err)
		}
		var all []types.QuotaUtilizationInfo
		in := &sq.GetQuotaUtilizationReportInput{ReportId: start.ReportId, MaxResults: aws.Int32(max)}
		for {
			out, err := c.GetQuotaUtilizationReport(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != types.ReportStatusCompleted || aws.ToInt32(out.TotalCount) < int32(len(all)+len(out.Quotas)) {
				t.Fatalf("report %+v", out)
			}
			for _, q := range out.Quotas { // the report's own calls use the servicequotas buckets
				if aws.ToString(q.ServiceCode) == "ecs" {
					all = append(all, q)
				}
			}
			if out.NextToken == nil {
				return all
			}
			in.NextToken = out.NextToken
		}
	}
	hot := report(n.quotas("AKIDHOT"), 1)
	burstCode := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	if len(hot) != 2 || aws.ToString(hot[0].QuotaCode) != burstCode || aws.ToFloat64(hot[0].Utilization) != 100 ||
		aws.ToFloat64(hot[1].Utilization) != 100 || aws.ToFloat64(hot[0].AppliedValue) != 50 || aws.ToString(hot[0].Namespace) != "AWS/Usage" {
		t.Fatalf("the throttled account's report, one quota a page: %+v, want cluster-read burst and rate at 100%%", hot)
	}
	calm := report(n.quotas("AKIDCALM"), 100)
	if len(calm) != 2 || aws.ToFloat64(calm[0].Utilization) != 10 {
		t.Fatalf("the calm account's report: %+v, want cluster-read at 10%%", calm)
	}
	if got := report(n.quotas("AKIDIDLE"), 100); len(got) != 0 {
		t.Fatalf("an idle account's report: %+v, want no ECS quotas", got)
	}

	start, err := n.quotas("AKIDHOT").StartQuotaUtilizationReport(ctx, &sq.StartQuotaUtilizationReportInput{})
	if err != nil {
		t.Fatal(err)
	}
	var noSuch *types.NoSuchResourceException
	_, err = n.quotas("AKIDCALM").GetQuotaUtilizationReport(ctx, &sq.GetQuotaUtilizationReportInput{ReportId: start.ReportId})
	if !errors.As(err, &noSuch) {
		t.Errorf("another account's report: %v, want NoSuchResourceException", err)
	}
	var illegal *types.IllegalArgumentException
	_, err = n.quotas("AKIDHOT").GetQuotaUtilizationReport(ctx, &sq.GetQuotaUtilizationReportInput{ReportId: start.ReportId, MaxResults: aws.Int32(1001)})
	if !errors.As(err, &illegal) {
		t.Errorf("MaxResults 1001: %v, want IllegalArgumentException", err)
	}
	var badToken *types.InvalidPaginationTokenException
	_, err = n.quotas("AKIDHOT").GetQuotaUtilizationReport(ctx, &sq.GetQuotaUtilizationReportInput{ReportId: start.ReportId, NextToken: aws.String("bm9wZQ==")})
	if !errors.As(err, &badToken) {
		t.Errorf("a forged NextToken: %v, want InvalidPaginationTokenException", err)
	}
	clock.Advance(16 * time.Minute)
	_, err = n.quotas("AKIDHOT").GetQuotaUtilizationReport(ctx, &sq.GetQuotaUtilizationReportInput{ReportId: start.ReportId})
	if !errors.As(err, &noSuch) {
		t.Errorf("a report 16 minutes old: %v, want NoSuchResourceException", err)
	}
}
