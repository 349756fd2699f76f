package node

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool"
)

// TestLivenessReachesThePool: a service's liveness block is given to the
// pool as its ServiceSpec.Liveness, and a service without one has none.
func TestLivenessReachesThePool(t *testing.T) {
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "c.yaml"), []byte(`services:
  - name: live
    route: {host: live.example}
    autoscale: {command: sh, liveness: {path: /healthz, period: 5s, timeout: 2s, failure_threshold: 4, initial_delay: 30s}}
  - name: plain
    route: {host: plain.example}
    autoscale: {command: sh}
`))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := pools{log: slog.New(slog.DiscardHandler)}.specs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*pool.Liveness{}
	for _, s := range specs {
		got[s.Name] = s.Liveness
	}
	want := pool.Liveness{Path: "/healthz", Period: 5 * time.Second, Timeout: 2 * time.Second, FailureThreshold: 4, InitialDelay: 30 * time.Second}
	if l := got["live"]; l == nil || *l != want {
		t.Fatalf("live's liveness: %+v, want %+v", l, want)
	}
	if l, ok := got["plain"]; !ok || l != nil {
		t.Fatalf("plain's liveness: %+v (listed %v), want none", l, ok)
	}
}
