package servicequotas_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas/types"
	"github.com/aws/smithy-go"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

const adminToken = "s3cret"

// testConfig serves ECS and the Service Quotas API.
func testConfig(t *testing.T) *quota.Config {
	t.Helper()
	ecsSvc, _ := quota.Preset("ecs")
	sqSvc, _ := quota.Preset("servicequotas")
	cfg, err := quota.NewConfig([]*quota.Service{ecsSvc, sqSvc}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

type node struct {
	srv *httptest.Server
	svc *servicequotas.Service
}

// newNode starts a gateway with the Service Quotas API as its
// servicequotas upstream and its approved values as the limits.
func newNode(t *testing.T, lim limiter.Limiter, opts servicequotas.Options) *node {
	t.Helper()
	if opts.Config == nil {
		opts.Config = testConfig(t)
	}
	svc, err := servicequotas.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{
		Config:        opts.Config,
		Limiter:       lim,
		AdminToken:    adminToken,
		Handlers:      map[string]http.Handler{"servicequotas": svc},
		Limits:        svc,
		AdminHandlers: svc.AdminHandlers(),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return &node{srv: srv, svc: svc}
}

func (n *node) quotas(key string) *sq.Client {
	return sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: aws.String(n.srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider(key, "x", ""), Retryer: aws.NopRetryer{}})
}

func (n *node) ecs(key string) *ecs.Client {
	return ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: aws.String(n.srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider(key, "x", ""), Retryer: aws.NopRetryer{}})
}

// admin calls an admin endpoint and returns its status and body.
func (n *node) admin(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, n.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// burst counts how many of n DescribeClusters calls at one instant pass.
func burst(t *testing.T, c *ecs.Client, n int) int {
	t.Helper()
	ok := 0
	for range n {
		_, err := c.DescribeClusters(context.Background(), &ecs.DescribeClustersInput{})
		var ae smithy.APIError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException":
		default:
			t.Fatalf("DescribeClusters: %v", err)
		}
	}
	return ok
}

func code(t *testing.T, c *sq.Client, name string) string {
	t.Helper()
	p := sq.NewListServiceQuotasPaginator(c, &sq.ListServiceQuotasInput{ServiceCode: aws.String("ecs"), MaxResults: aws.Int32(7)})
	pages, n := 0, 0
	found := ""
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, q := range out.Quotas {
			n++
			if aws.ToString(q.QuotaName) == name {
				found = aws.ToString(q.QuotaCode)
				if !q.Adjustable || aws.ToString(q.Unit) != "None" {
					t.Errorf("%s: %+v", name, q)
				}
			}
		}
	}
	ecsPreset, _ := quota.Preset("ecs")
	want := 2 * len(ecsPreset.Categories) // two quotas a category, Fargate's and the unlisted operations' included
	if n != want || pages != (want+6)/7 {
		t.Fatalf("ECS lists %d quotas in %d pages of 7, want %d in %d", n, pages, want, (want+6)/7)
	}
	if found == "" {
		t.Fatalf("no quota named %q", name)
	}
	return found
}

// TestSDKFlow: list → request → PENDING → approve via admin → the ECS
// client is throttled at the new burst.
func TestSDKFlow(t *testing.T) {
	clock := limitertest.NewClock()
	n := newNode(t, memory.New(memory.Options{Now: clock.Now}), servicequotas.Options{Now: clock.Now})
	ctx := context.Background()
	c := n.quotas("AKIDTENANT")
	burstCode := code(t, c, "cluster-read burst")
	if burstCode != servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst) {
		t.Fatalf("code %s is not the derived one", burstCode)
	}

	if got := burst(t, n.ecs("AKIDTENANT"), 80); got != 50 {
		t.Fatalf("before: %d of 80 allowed, want the default burst 50", got)
	}
	req, err := c.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burstCode), DesiredValue: aws.Float64(100)})
	if err != nil {
		t.Fatal(err)
	}
	if req.RequestedQuota.Status != types.RequestStatusPending || aws.ToFloat64(req.RequestedQuota.DesiredValue) != 100 {
		t.Fatalf("request: %+v", req.RequestedQuota)
	}
	id := aws.ToString(req.RequestedQuota.Id)

	// A second open request on the same quota.
	_, err = c.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burstCode), DesiredValue: aws.Float64(120)})
	var exists *types.ResourceAlreadyExistsException
	if !errors.As(err, &exists) {
		t.Fatalf("second request: %v, want ResourceAlreadyExistsException", err)
	}

	got, err := c.GetRequestedServiceQuotaChange(ctx, &sq.GetRequestedServiceQuotaChangeInput{RequestId: aws.String(id)})
	if err != nil || got.RequestedQuota.Status != types.RequestStatusPending {
		t.Fatalf("get: %+v %v", got, err)
	}
	clock.Advance(10e9) // the bucket refills; still the old limit
	if status, body := n.admin(t, "GET", "/v1/admin/servicequotas/requests?status=PENDING", ""); status != 200 || !strings.Contains(body, id) {
		t.Fatalf("admin list: %d %s", status, body)
	}
	if status, body := n.admin(t, "POST", "/v1/admin/servicequotas/requests/"+id+"/approve", `{"reason":"tenant launch"}`); status != 200 || !strings.Contains(body, `"APPROVED"`) {
		t.Fatalf("approve: %d %s", status, body)
	}
	if status, _ := n.admin(t, "POST", "/v1/admin/servicequotas/requests/"+id+"/deny", `{}`); status != 409 {
		t.Fatalf("deny after approve: %d, want 409", status)
	}
	got, err = c.GetRequestedServiceQuotaChange(ctx, &sq.GetRequestedServiceQuotaChangeInput{RequestId: aws.String(id)})
	if err != nil || got.RequestedQuota.Status != types.RequestStatusApproved {
		t.Fatalf("after approve: %+v %v", got, err)
	}
	q, err := c.GetServiceQuota(ctx, &sq.GetServiceQuotaInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burstCode)})
	if err != nil || aws.ToFloat64(q.Quota.Value) != 100 {
		t.Fatalf("GetServiceQuota: %+v %v", q, err)
	}
	d, err := c.GetAWSDefaultServiceQuota(ctx, &sq.GetAWSDefaultServiceQuotaInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burstCode)})
	if err != nil || aws.ToFloat64(d.Quota.Value) != 50 {
		t.Fatalf("GetAWSDefaultServiceQuota: %+v %v", d, err)
	}
	// The bucket had refilled to 50 under the old limit; the new
	// capacity lets it fill to 100 after 2.5 s at 20/s.
	clock.Advance(3e9)
	if got := burst(t, n.ecs("AKIDTENANT"), 150); got != 100 {
		t.Fatalf("after approval: %d of 150 allowed, want the new burst 100", got)
	}
	if got := burst(t, n.ecs("AKIDOTHER"), 80); got != 50 {
		t.Fatalf("another account: %d of 80 allowed, want the default 50", got)
	}

	hist, err := c.ListRequestedServiceQuotaChangeHistoryByQuota(ctx, &sq.ListRequestedServiceQuotaChangeHistoryByQuotaInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burstCode), Status: types.RequestStatusApproved})
	if err != nil || len(hist.RequestedQuotas) != 1 {
		t.Fatalf("history by quota: %+v %v", hist, err)
	}
	if h, err := n.quotas("AKIDOTHER").ListRequestedServiceQuotaChangeHistory(ctx, &sq.ListRequestedServiceQuotaChangeHistoryInput{}); err != nil || len(h.RequestedQuotas) != 0 {
		t.Fatalf("another account sees %+v %v", h, err)
	}

	// Decrease by the operator: back to 30, and a full bucket is cut.
	status, body := n.admin(t, "PUT", "/v1/admin/servicequotas/applied",
		`{"account":"AKIDTENANT","region":"us-east-1","service_code":"ecs","quota_code":"`+burstCode+`","value":30}`)
	if status != 200 {
		t.Fatalf("decrease: %d %s", status, body)
	}
	clock.Advance(10e9)
	if got := burst(t, n.ecs("AKIDTENANT"), 80); got != 30 {
		t.Fatalf("after the decrease: %d of 80 allowed, want 30", got)
	}
}

func TestSDKErrors(t *testing.T) {
	clock := limitertest.NewClock()
	n := newNode(t, memory.New(memory.Options{Now: clock.Now}), servicequotas.Options{Now: clock.Now,
		Policy: servicequotas.Policy{Rules: []servicequotas.Rule{{Service: "ecs", AutoApproveFactor: 2, Rate: servicequotas.Bounds{Max: 1000}}}}})
	ctx := context.Background()
	c := n.quotas("AKIDERR")
	rate := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Rate)
	var noSuch *types.NoSuchResourceException
	if _, err := c.GetServiceQuota(ctx, &sq.GetServiceQuotaInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String("L-00000000")}); !errors.As(err, &noSuch) {
		t.Fatalf("unknown quota: %v", err)
	}
	if _, err := c.ListServiceQuotas(ctx, &sq.ListServiceQuotasInput{ServiceCode: aws.String("nope")}); !errors.As(err, &noSuch) {
		t.Fatalf("unknown service: %v", err)
	}
	var bad *types.InvalidPaginationTokenException
	if _, err := c.ListServiceQuotas(ctx, &sq.ListServiceQuotasInput{ServiceCode: aws.String("ecs"), NextToken: aws.String("Zm9v")}); !errors.As(err, &bad) {
		t.Fatalf("bad token: %v", err)
	}
	var illegal *types.IllegalArgumentException
	if _, err := c.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(rate), DesiredValue: aws.Float64(5)}); !errors.As(err, &illegal) {
		t.Fatalf("a decrease asked by a tenant: %v", err)
	}
	// Within 2× the default (20/s): approved at once; above 1000: not.
	out, err := c.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(rate), DesiredValue: aws.Float64(40)})
	if err != nil || out.RequestedQuota.Status != types.RequestStatusApproved {
		t.Fatalf("auto-approve: %+v %v", out, err)
	}
	out, err = c.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(rate), DesiredValue: aws.Float64(5000)})
	if err != nil || out.RequestedQuota.Status != types.RequestStatusNotApproved {
		t.Fatalf("above max: %+v %v", out, err)
	}
	out, err = c.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(rate), DesiredValue: aws.Float64(60)})
	if err != nil || out.RequestedQuota.Status != types.RequestStatusPending {
		t.Fatalf("above the factor: %+v %v", out, err)
	}
	var noOrg *types.NoAvailableOrganizationException
	if _, err := c.GetAssociationForServiceQuotaTemplate(ctx, &sq.GetAssociationForServiceQuotaTemplateInput{}); !errors.As(err, &noOrg) {
		t.Fatalf("template operation: %v", err)
	}
	svcs, err := c.ListServices(ctx, &sq.ListServicesInput{})
	if err != nil || len(svcs.Services) != 2 || aws.ToString(svcs.Services[0].ServiceCode) != "ecs" {
		t.Fatalf("ListServices: %+v %v", svcs, err)
	}
	var throttled *types.TooManyRequestsException
	for i := 0; i < 30; i++ {
		if _, err = c.ListServices(ctx, &sq.ListServicesInput{}); err != nil {
			break
		}
	}
	if !errors.As(err, &throttled) {
		t.Fatalf("the API's own throttle: %v", err)
	}
}

func mustLimit(t *testing.T, capacity int64, rate float64) bucket.Limit {
	t.Helper()
	l, err := bucket.NewLimit(capacity, rate)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
