package servicequotas_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// TestCLISession runs the README's Service Quotas session with the AWS
// CLI (v1), whose botocore parses and validates every answer.
func TestCLISession(t *testing.T) {
	t.Parallel() // its own node and aws processes; overlaps the browser test
	bin, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("aws CLI not installed (CI=true)")
		}
		t.Skip("aws CLI not installed: skipping the README's CLI session")
	}
	clock := limitertest.NewClock()
	n, rec := newLiveNode(t, clock)
	home := t.TempDir()
	run := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(bin, append(append([]string{"service-quotas"}, args...), "--endpoint-url", n.srv.URL, "--output", "json")...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "AWS_ACCESS_KEY_ID=AKIDEXAMPLE",
			"AWS_SECRET_ACCESS_KEY=x", "AWS_DEFAULT_REGION=us-east-1", "AWS_MAX_ATTEMPTS=1",
			"AWS_CONFIG_FILE=" + home + "/none", "AWS_SHARED_CREDENTIALS_FILE=" + home + "/none"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws service-quotas %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("aws service-quotas %s: %v\n%s", args[0], err, out)
		}
		return v
	}
	list := run("list-service-quotas", "--service-code", "ecs")
	ecsPreset, _ := quota.Preset("ecs")
	if qs := list["Quotas"].([]any); len(qs) != 2*len(ecsPreset.Categories) { // two quotas a category, Fargate's included
		t.Fatalf("list-service-quotas: %d quotas, want %d", len(qs), 2*len(ecsPreset.Categories))
	}
	code := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	q := run("get-service-quota", "--service-code", "ecs", "--quota-code", code)
	if v := q["Quota"].(map[string]any)["Value"]; v != 50.0 {
		t.Fatalf("get-service-quota: %v", q)
	}
	req := run("request-service-quota-increase", "--service-code", "ecs", "--quota-code", code, "--desired-value", "100")
	id := req["RequestedQuota"].(map[string]any)["Id"].(string)
	if st := run("get-requested-service-quota-change", "--request-id", id)["RequestedQuota"].(map[string]any)["Status"]; st != "PENDING" {
		t.Fatalf("status %v, want PENDING", st)
	}
	if status, body := n.admin(t, "POST", "/v1/admin/servicequotas/requests/"+id+"/approve", `{"reason":"launch"}`); status != 200 {
		t.Fatalf("approve: %d %s", status, body)
	}
	if st := run("get-requested-service-quota-change", "--request-id", id)["RequestedQuota"].(map[string]any)["Status"]; st != "APPROVED" {
		t.Fatalf("status %v, want APPROVED", st)
	}
	if v := run("get-service-quota", "--service-code", "ecs", "--quota-code", code)["Quota"].(map[string]any)["Value"]; v != 100.0 {
		t.Fatalf("value after approval %v", v)
	}
	for _, args := range [][]string{
		{"list-services"},
		{"list-aws-default-service-quotas", "--service-code", "ecs", "--max-items", "3"},
		{"get-aws-default-service-quota", "--service-code", "ecs", "--quota-code", code},
		{"list-requested-service-quota-change-history", "--status", "APPROVED"},
		{"list-requested-service-quota-change-history-by-quota", "--service-code", "ecs", "--quota-code", code},
	} {
		run(args...)
	}
	// The utilization report: the session's own calls used the account's
	// servicequotas buckets.
	rec.Tick(clock.Now())
	rid := run("start-quota-utilization-report")["ReportId"].(string)
	rep := run("get-quota-utilization-report", "--report-id", rid, "--max-results", "1")
	if rep["Status"] != "COMPLETED" || len(rep["Quotas"].([]any)) != 1 || rep["NextToken"] == nil {
		t.Fatalf("get-quota-utilization-report: %v, want one quota and a next page", rep)
	}
	if q := rep["Quotas"].([]any)[0].(map[string]any); q["ServiceCode"] != "servicequotas" || q["Utilization"].(float64) <= 0 {
		t.Fatalf("most used quota %v, want a servicequotas one", q)
	}
}
