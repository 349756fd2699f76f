package main

import (
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
	for _, row := range []string{"ecs  L-15F51B3B  cluster-read burst  50  None", "ecs  L-3E62B30D  cluster-read rate  20  None per second"} {
		if !strings.Contains(squeeze(out), row) {
			t.Errorf("output lacks %q:\n%s", row, out)
		}
	}
	if n := strings.Count(out, "  ecs  "); n < 40 {
		t.Errorf("%d quota rows, want 40", n)
	}
}
