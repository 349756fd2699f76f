package main

import (
	"testing"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
)

// TestCheckPrintsTheRuntimeDefaults: tollgate check prints a service's
// effective request timeout, pending bound, readiness timeout and grace
// from config.s copies of the defaults; they must be the ones the pool and
// the process runner apply.
func TestCheckPrintsTheRuntimeDefaults(t *testing.T) {
	if config.DefaultRequestTimeout != pool.DefaultRequestTimeout || config.DefaultMaxPending != pool.DefaultMaxPending ||
		config.DefaultReadinessTimeout != process.DefaultReadyTimeout ||
		config.DefaultStopGrace != pool.DefaultStopGrace || config.DefaultRolloutTimeout != pool.DefaultRolloutTimeout {
		t.Fatalf("config.s defaults %v %d %v %v differ from the runtime's %v %d %v %v",
			config.DefaultRequestTimeout, config.DefaultMaxPending, config.DefaultReadinessTimeout, config.DefaultStopGrace,
			pool.DefaultRequestTimeout, pool.DefaultMaxPending, process.DefaultReadyTimeout, pool.DefaultStopGrace)
	}
}

// TestCheckPrintsTheLivenessDefaults: the liveness defaults config fills
// in and the over-max bound tollgate check prints are the pool's.
func TestCheckPrintsTheLivenessDefaults(t *testing.T) {
	l := pool.Liveness{Path: "/"}.WithDefaults()
	if config.DefaultLivenessPeriod != l.Period || config.DefaultLivenessTimeout != l.Timeout ||
		config.DefaultLivenessFailureThreshold != l.FailureThreshold || config.MaxOverMaxGrace != pool.MaxOverMaxGrace {
		t.Fatalf("config.s liveness defaults %v %v %d and bound %v differ from the pool's %v %v %d %v",
			config.DefaultLivenessPeriod, config.DefaultLivenessTimeout, config.DefaultLivenessFailureThreshold, config.MaxOverMaxGrace,
			l.Period, l.Timeout, l.FailureThreshold, pool.MaxOverMaxGrace)
	}
}
