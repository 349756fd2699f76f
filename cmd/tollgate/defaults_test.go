package main

import (
	"testing"

	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
	"github.com/tollgate/tollgate/quota"
)

// TestCheckPrintsTheRuntimeDefaults: tollgate check prints a service's
// effective request timeout, pending bound, readiness timeout and grace
// from quota's copies of the defaults; they must be the ones the pool and
// the process runner apply.
func TestCheckPrintsTheRuntimeDefaults(t *testing.T) {
	if quota.DefaultRequestTimeout != pool.DefaultRequestTimeout || quota.DefaultMaxPending != pool.DefaultMaxPending ||
		quota.DefaultReadinessTimeout != process.DefaultReadyTimeout ||
		quota.DefaultStopGrace != pool.DefaultStopGrace {
		t.Fatalf("quota's defaults %v %d %v %v differ from the runtime's %v %d %v %v",
			quota.DefaultRequestTimeout, quota.DefaultMaxPending, quota.DefaultReadinessTimeout, quota.DefaultStopGrace,
			pool.DefaultRequestTimeout, pool.DefaultMaxPending, process.DefaultReadyTimeout, pool.DefaultStopGrace)
	}
}
