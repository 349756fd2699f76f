package main

import (
	"os"
	"strings"
	"testing"
)

// TestCheckShowsQuotaCodes: `tollgate check --preset ecs` prints every
// category's two Service Quotas codes.
func TestCheckShowsQuotaCodes(t *testing.T) {
	code, out, errs := runCmd("check", "--preset", "ecs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, row := range []string{"ecs  L-15F51B3B  cluster-read burst  50  requests", "ecs  L-3E62B30D  cluster-read rate  20  requests per second"} {
		if !strings.Contains(squeeze(out), row) {
			t.Errorf("output lacks %q:\n%s", row, out)
		}
	}
	if n := strings.Count(out, "  ecs  "); n < 46 {
		t.Errorf("%d quota rows, want 46 (23 categories, Fargate's 3 included)", n)
	}
}

// TestReadmeServiceQuotasConfigChecks: the README's service_quotas
// config passes `tollgate check`.
func TestReadmeServiceQuotasConfigChecks(t *testing.T) {
	section := docSection(t, "Quota increases: the Service Quotas API")
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the section has no yaml block")
	}
	path := t.TempDir() + "/sq.yaml"
	if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd("check", path)
	if code != 0 || errs != "" || !strings.Contains(out, "servicequotas") {
		t.Fatalf("check: exit %d: %s\n%s", code, errs, out)
	}
	// Each quota's effective rule: cluster-read's own values, every other
	// quota the factors of its default.
	for _, row := range []string{"ecs  L-15F51B3B  cluster-read burst  50  requests  approve up to 80, refuse above 1000",
		"ecs  L-3E62B30D  cluster-read rate  20  requests per second  approve up to 30, refuse above 100",
		"ecs  L-D7A26B72  service-read burst  100  requests  approve up to 200, refuse above 2000",
		"ecs  L-AB92B562  service-read rate  20  requests per second  approve up to 40, refuse above 400"} {
		if !strings.Contains(squeeze(out), row) {
			t.Errorf("output lacks %q:\n%s", row, out)
		}
	}
}

// TestCheckShowsFargateBuckets: `tollgate check --preset ecs` prints
// Fargate's three buckets, what takes from them, and their quota codes.
func TestCheckShowsFargateBuckets(t *testing.T) {
	code, out, errs := runCmd("check", "--preset", "ecs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, row := range []string{
		"fargate-run-task  20  20  (RunTask on Fargate, by launchType FARGATE or a capacityProviderStrategy naming FARGATE or FARGATE_SPOT: one token per call)",
		"fargate-on-demand-tasks  100  20  (RunTask on Fargate On-Demand: one token per task launched on FARGATE, count 1 to 10 a call)",
		"fargate-spot-tasks  100  20  (RunTask on Fargate Spot: one token per task launched on FARGATE_SPOT, count 1 to 10 a call)",
		"ecs  L-1B719E19  fargate-run-task burst  20  tokens  operator decides",
		"ecs  L-E9FE7943  fargate-on-demand-tasks rate  20  tokens per second  operator decides",
		"ecs  L-76578319  fargate-spot-tasks burst  100  tokens  operator decides",
	} {
		if !strings.Contains(squeeze(out), row) {
			t.Errorf("output lacks %q:\n%s", row, out)
		}
	}
}
