package node

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas/types"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/servicequotas"
)

// runWithConfig runs a node, until the test ends, on the config file
// tollgate.yaml in dir with text.
func runWithConfig(t *testing.T, dir, text string) *Node {
	t.Helper()
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: writeFile(t, dir, "tollgate.yaml", text)})
	run(t, n, &logs)
	return n
}

// TestNodeServesServiceQuotas: a node with `preset: servicequotas`
// answers the API, applies the file's approval policy, and a reload with
// a stricter policy keeps the approved value.
func TestNodeServesServiceQuotas(t *testing.T) {
	dir := t.TempDir()
	n := runWithConfig(t, dir, "services:\n  - preset: ecs\n  - preset: servicequotas\nservice_quotas:\n  approval:\n    - auto_approve_factor: 3\n")
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
	help := map[string]string{}
	for _, e := range index.Endpoints {
		seen[e.Path] = true
		help[e.Path] = e.Help
		if e.Help == "" || strings.Contains(e.Help, "Options.AdminHandlers") {
			t.Errorf("%s: help %q", e.Path, e.Help)
		}
	}
	// The traffic routes have their own line, not the revisions listing's.
	if rev, tr := help["GET /v1/admin/pools/{service}/revisions"], help["PUT /v1/admin/pools/{service}/traffic"]; rev == tr || !strings.Contains(tr, "traffic") {
		t.Errorf("the revisions route and the traffic route share, or lack, their help: %q, %q", rev, tr)
	}
	for _, p := range []string{"GET /v1/admin/pools", "POST /v1/admin/servicequotas/requests/{id}/approve", "PUT /v1/admin/servicequotas/applied"} {
		if !seen[p] {
			t.Errorf("%s is not listed in %v", p, index.Endpoints)
		}
	}
}

// TestOneAccountIDAcrossAWSAPIs: one access key the config does not map
// is one account: Cloud Map's ARNs and Service Quotas' ARNs and Requester
// show the same 12-digit id, and the bucket an approved increase applies
// to is the one that key's ECS calls take from.
func TestOneAccountIDAcrossAWSAPIs(t *testing.T) {
	n := runWithConfig(t, t.TempDir(), "services:\n  - preset: ecs\n  - preset: cloudmap\n  - preset: servicequotas\nservice_quotas:\n  approval:\n    - auto_approve_factor: 3\n")
	ctx := context.Background()
	endpoint := aws.String("http://" + n.Addr().String())
	creds := credentials.NewStaticCredentialsProvider("AKIDONEACCOUNT", "x", "")
	cm := sd.New(sd.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds, Retryer: aws.NopRetryer{}})
	if _, err := cm.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("one")}); err != nil {
		t.Fatal(err)
	}
	nss, err := cm.ListNamespaces(ctx, &sd.ListNamespacesInput{})
	if err != nil || len(nss.Namespaces) != 1 {
		t.Fatalf("ListNamespaces: %+v %v", nss, err)
	}
	arnAccount := func(arn string) string {
		parts := strings.Split(arn, ":")
		if len(parts) < 5 {
			t.Fatalf("ARN %q", arn)
		}
		return parts[4]
	}
	want := arnAccount(aws.ToString(nss.Namespaces[0].Arn))
	if want != awsjson.AccountID("AKIDONEACCOUNT") {
		t.Fatalf("Cloud Map's account %s, want %s", want, awsjson.AccountID("AKIDONEACCOUNT"))
	}
	c := sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds, Retryer: aws.NopRetryer{}})
	code := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	q, err := c.GetServiceQuota(ctx, &sq.GetServiceQuotaInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(code)})
	if err != nil {
		t.Fatal(err)
	}
	if got := arnAccount(aws.ToString(q.Quota.QuotaArn)); got != want {
		t.Errorf("Service Quotas' QuotaArn account %s, Cloud Map's %s", got, want)
	}
	out, err := c.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(code), DesiredValue: aws.Float64(100)})
	if err != nil || out.RequestedQuota.Status != types.RequestStatusApproved {
		t.Fatalf("increase: %+v %v", out, err)
	}
	if got := aws.ToString(out.RequestedQuota.Requester); got != `{"accountId":"`+want+`"}` {
		t.Errorf("Requester %s, want account %s", got, want)
	}
	if got := arnAccount(aws.ToString(out.RequestedQuota.QuotaArn)); got != want {
		t.Errorf("request's QuotaArn account %s, want %s", got, want)
	}
	// The increase applies to the bucket of the key's own calls.
	resp, err := http.Post("http://"+n.Addr().String()+"/v1/take", "application/json",
		strings.NewReader(`{"service":"ecs","account":"AKIDONEACCOUNT","region":"us-east-1","category":"cluster-read","tokens":0}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var take struct {
		Limit struct{ Capacity int64 } `json:"limit"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&take); err != nil || take.Limit.Capacity != 100 {
		t.Errorf("the key's bucket after the increase: %+v %v; want capacity 100", take, err)
	}
}
