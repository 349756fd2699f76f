package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseLiveness reads a full liveness block, and fills Cloud Run's
// defaults into one that gives only the path; a changed check changes
// the template (a new revision, as on Cloud Run).
func TestParseLiveness(t *testing.T) {
	dir := t.TempDir()
	parse := func(block string) *Autoscale {
		t.Helper()
		cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte("services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      command: sh\n"+block))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Autoscale["a"]
	}
	full := parse("      liveness: {path: \"/live?deep=1\", period: 5s, timeout: 2s, failure_threshold: 4, initial_delay: 30s}\n")
	if got, want := *full.Liveness, (Liveness{"/live?deep=1", 5 * time.Second, 2 * time.Second, 4, 30 * time.Second}); got != want {
		t.Fatalf("liveness %+v, want %+v", got, want)
	}
	short := parse("      liveness: {path: /healthz}\n")
	if got, want := *short.Liveness, (Liveness{"/healthz", DefaultLivenessPeriod, DefaultLivenessTimeout, DefaultLivenessFailureThreshold, 0}); got != want {
		t.Fatalf("liveness with defaults %+v, want %+v", got, want)
	}
	none := parse("")
	if none.Liveness != nil {
		t.Fatalf("no liveness block gave %+v", none.Liveness)
	}
	if full.Template() == short.Template() || short.Template() == none.Template() {
		t.Fatal("a changed liveness check kept the template")
	}
	var table strings.Builder
	cfg, _ := Parse(filepath.Join(dir, "c.yaml"), []byte("services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, liveness: {path: /healthz}}\n"))
	if err := cfg.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "liveness: GET /healthz every 10s (first 10s after ready), timeout 1s, unhealthy after 3 failures in a row") {
		t.Fatalf("table without the liveness line:\n%s", table.String())
	}
}

// TestParseLivenessErrors: each bad field is named with its file, line
// and column.
func TestParseLivenessErrors(t *testing.T) {
	dir := t.TempDir()
	head := "services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      command: sh\n"
	cases := []struct{ yaml, want string }{
		{"      liveness: {period: 5s}\n",
			"c.yaml:6:17: services[0].autoscale.liveness.path: missing"},
		{"      liveness: {path: healthz}\n",
			"c.yaml:6:24: services[0].autoscale.liveness.path: \"healthz\" is not an HTTP path such as /healthz"},
		{"      liveness: {path: \"/a b\"}\n",
			"c.yaml:6:24: services[0].autoscale.liveness.path: \"/a b\" is not an HTTP path"},
		{"      liveness: {path: /" + strings.Repeat("x", 1024) + "}\n",
			"c.yaml:6:24: services[0].autoscale.liveness.path: \"/xxx"},
		{"      liveness: {path: /h, period: 500ms}\n",
			"c.yaml:6:36: services[0].autoscale.liveness.period: \"500ms\" is not a duration in [1s, 1h0m0s]"},
		{"      liveness: {path: /h, period: 2h}\n",
			"c.yaml:6:36: services[0].autoscale.liveness.period: \"2h\" is not a duration in [1s, 1h0m0s]"},
		{"      liveness: {path: /h, timeout: 0s}\n",
			"c.yaml:6:37: services[0].autoscale.liveness.timeout: \"0s\" is not a duration in [1s, 1h0m0s]"},
		{"      liveness:\n        path: /h\n        period: 2s\n        timeout: 3s\n",
			"c.yaml:9:18: services[0].autoscale.liveness.timeout: 3s is more than period 2s (line 8): a probe must end before the next"},
		{"      liveness: {path: /h, timeout: 11s}\n",
			"c.yaml:6:37: services[0].autoscale.liveness.timeout: 11s is more than the default period 10s"},
		{"      liveness: {path: /h, failure_threshold: 0}\n",
			"c.yaml:6:47: services[0].autoscale.liveness.failure_threshold: 0 not in [1, 1000]"},
		{"      liveness: {path: /h, failure_threshold: three}\n",
			"c.yaml:6:47: services[0].autoscale.liveness.failure_threshold: want a whole number"},
		{"      liveness: {path: /h, initial_delay: 5m}\n",
			"c.yaml:6:43: services[0].autoscale.liveness.initial_delay: \"5m\" is not a duration in [0s, 4m0s]"},
		{"      liveness: {path: /h, grace: 1s}\n",
			"c.yaml:6:28: services[0].autoscale.liveness.grace: unknown field"},
		{"      liveness: /healthz\n",
			"c.yaml:6:17: services[0].autoscale.liveness: want a mapping"},
	}
	for _, c := range cases {
		_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(head+c.yaml))
		if err == nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v", c.yaml, err)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml")
		if !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.yaml, got, c.want)
		}
	}
	// With kubernetes the pod spec's livenessProbe does it.
	_, err := Parse(filepath.Join(dir, "c.yaml"), []byte("services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      kubernetes: {deployment: d, port: 8080}\n      liveness: {path: /h}\n"))
	if err == nil || !strings.Contains(err.Error(), "services[0].autoscale.liveness: not used with kubernetes") {
		t.Fatalf("liveness with kubernetes: %v", err)
	}
}
