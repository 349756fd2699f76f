package node

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas/types"

	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/servicequotas"
)

// TestNodeServesServiceQuotas: a node with `preset: servicequotas`
// answers the API, applies the file's approval policy, and a reload with
// a stricter policy keeps the approved value.
func TestNodeServesServiceQuotas(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n  - preset: servicequotas\nservice_quotas:\n  approval:\n    - auto_approve_factor: 3\n")
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: cfg})
	run(t, n, &logs)
	c := sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + n.Addr().String()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDNODE", "x", ""), Retryer: aws.NopRetryer{}})
	code := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	out, err := c.RequestServiceQuotaIncrease(context.Background(), &sq.RequestServiceQuotaIncreaseInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(code), DesiredValue: aws.Float64(150)})
	if err != nil || out.RequestedQuota.Status != types.RequestStatusApproved {
		t.Fatalf("within 3x: %+v %v", out, err)
	}
	writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n  - preset: servicequotas\n")
	if _, err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	q, err := c.GetServiceQuota(context.Background(), &sq.GetServiceQuotaInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(code)})
	if err != nil || aws.ToFloat64(q.Quota.Value) != 150 {
		t.Fatalf("after reload: %+v %v", q, err)
	}
	out, err = c.RequestServiceQuotaIncrease(context.Background(), &sq.RequestServiceQuotaIncreaseInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Rate)), DesiredValue: aws.Float64(21)})
	if err != nil || out.RequestedQuota.Status != types.RequestStatusPending {
		t.Fatalf("no policy after reload: %+v %v", out, err)
	}
	// The admin endpoints are behind the token: none configured, none served.
	resp, err := http.Get("http://" + n.Addr().String() + "/v1/admin/servicequotas/requests")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 && !strings.HasPrefix(resp.Status, "401") {
		t.Fatalf("admin without a token: %s", resp.Status)
	}
}

// TestAdminIndexHelpsWithEveryEndpoint: GET /v1/admin/ gives each
// endpoint the node mounts, the pools' and Service Quotas' too, its own
// line of help.
func TestAdminIndexHelpsWithEveryEndpoint(t *testing.T) {
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{AdminToken: "tok"})
	run(t, n, &logs)
	req, _ := http.NewRequest("GET", "http://"+n.Addr().String()+"/v1/admin/", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var index struct {
		Endpoints []struct{ Path, Help string } `json:"endpoints"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&index); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/admin/: %s %v", resp.Status, err)
	}
	seen := map[string]bool{}
	for _, e := range index.Endpoints {
		seen[e.Path] = true
		if e.Help == "" || strings.Contains(e.Help, "Options.AdminHandlers") {
			t.Errorf("%s: help %q", e.Path, e.Help)
		}
	}
	for _, p := range []string{"GET /v1/admin/pools", "POST /v1/admin/servicequotas/requests/{id}/approve", "PUT /v1/admin/servicequotas/applied"} {
		if !seen[p] {
			t.Errorf("%s is not listed in %v", p, index.Endpoints)
		}
	}
}
