package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

func TestParseAutoscaleService(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "bin", "hello")
	os.MkdirAll(filepath.Dir(prog), 0o755)
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "tollgate.yaml")
	cfg, err := Parse(file, []byte(`services:
  - name: hello
    route: {path_prefix: /hello/, strip_prefix: true}
    autoscale:
      command: [./bin/hello, --flag]
      args: [x]
      env: [{name: GREETING, value: hi}]
      readiness: {path: /healthz, timeout: 20s}
      max_concurrency: 8
      cpus: 2
      cpu_target: 0.7
      concurrency_target: 0.5
      min_instances: 1
      max_instances: 5
      idle_timeout: 30s
      termination_grace_period: 3s
      request_timeout: 10m
      max_pending: 50
      rollout_timeout: 2m
  - preset: ecs
    autoscale: {command: sh, env: {MODE: ecs}}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := cfg.Quota.Service("hello")
	a := cfg.Autoscale["hello"]
	if a == nil || !s.Autoscaled || s.Route == nil || len(s.Categories) != 0 {
		t.Fatalf("service: %+v", s)
	}
	if a.WorkingDir != dir || a.Command[0] != "./bin/hello" || a.Args[0] != "x" || a.Env[0] != (EnvVar{"GREETING", "hi"}) {
		t.Fatalf("autoscale: %+v", a)
	}
	e := a.Engine
	if e.MaxConcurrency != 8 || e.CPUsPerInstance != 2 || e.CPUTarget != 0.7 || e.ConcurrencyTarget != 0.5 ||
		e.MinInstances != 1 || e.MaxInstances != 5 || e.IdleTimeout != 30*time.Second || a.StopGrace != 3*time.Second ||
		a.Readiness != (Readiness{"/healthz", 20 * time.Second}) {
		t.Fatalf("engine: %+v", a)
	}
	if a.RequestTimeout != 10*time.Minute || a.MaxPending != 50 || a.RolloutTimeout != 2*time.Minute {
		t.Fatalf("request bounds: %v %d %v", a.RequestTimeout, a.MaxPending, a.RolloutTimeout)
	}
	ecs, _ := cfg.Quota.Service("ecs")
	preset, _ := quota.Preset("ecs")
	if !ecs.Autoscaled || cfg.Autoscale["ecs"] == nil || ecs.Route != nil || len(ecs.Categories) != len(preset.Categories) {
		t.Fatalf("ecs preset with a pool: %+v", ecs)
	}
	if got, ok := s.Route.Match("x", "/hello/a/b"); !ok || got != "/a/b" {
		t.Fatalf("Match = %q %v", got, ok)
	}
	if _, ok := s.Route.Match("x", "/helloworld"); ok {
		t.Fatal("/helloworld matched /hello/")
	}
	if got, ok := s.Route.Match("x", "/hello"); !ok || got != "/" {
		t.Fatalf("Match(/hello) = %q %v", got, ok)
	}
	if r := cfg.Quota.Routed(); len(r) != 1 || r[0] != s {
		t.Fatalf("Routed = %v", r)
	}
	var table strings.Builder
	if err := cfg.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"route: host any, path prefix /hello/, strip prefix true", `autoscaled: ["./bin/hello" "--flag" "x"]`, "1–5 instances, max concurrency 8", "1 CPU per instance,",
		"limits: request timeout 10m0s (pending wait included), max pending 50, readiness timeout 20s, termination grace 3s, rollout timeout 2m0s",
		"pending wait: max(10s, 3.5 × expected cold start), then 429 at max instances; initial cold start 2s (until one is measured)"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	// Same settings give the same template; a new env value another.
	a2 := *a
	if a2.Template() != a.Template() {
		t.Fatal("template not stable")
	}
	a2.Env = []EnvVar{{"GREETING", "bye"}}
	if a2.Template() == a.Template() {
		t.Fatal("a changed env kept the template")
	}
	a3 := *a
	a3.Engine.MaxInstances = 9
	if a3.Template() != a.Template() {
		t.Fatal("new bounds changed the template")
	}
	a3.StopGrace = time.Minute
	if a3.Template() == a.Template() {
		t.Fatal("a new grace period kept the template (the runner's grace is fixed)")
	}
}

func TestParseAutoscaleErrors(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	cases := []struct{ yaml, want string }{
		{"services:\n  - name: a\n    route: {path_prefix: /a/}\n    autoscale: {max_instances: 2}\n",
			"c.yaml:4:16: services[0].autoscale.command: missing"},
		{"services:\n  - name: a\n    route: {path_prefix: /a/}\n    autoscale: {command: [./no-such-program]}\n",
			"c.yaml:4:26: services[0].autoscale.command: \"./no-such-program\" cannot be run"},
		{"services:\n  - name: a\n    route: {path_prefix: /a/}\n    autoscale: {command: [" + noexec + "]}\n",
			"services[0].autoscale.command: \"" + noexec + "\" cannot be run"},
		{"services:\n  - name: a\n    route: {path_prefix: /a/}\n",
			"c.yaml:3:12: services[0].route: a route leads to the service's autoscale pool"},
		{"services:\n  - name: a\n    route: {path_prefix: /v1/x}\n    autoscale: {command: sh}\n",
			"c.yaml:3:26: services[0].route.path_prefix: \"/v1/x\" overlaps tollgate's own endpoints"},
		{"services:\n  - name: a\n    route: {path_prefix: /}\n    autoscale: {command: sh}\n",
			"services[0].route: give a path_prefix other than / or a host"},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, env: {PORT: \"1\"}}\n",
			"c.yaml:4:36: services[0].autoscale.env.PORT: PORT is set by tollgate"},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, min_instances: 3, max_instances: 2}\n",
			"c.yaml:4:45: services[0].autoscale.min_instances: 3 is more than max_instances 2"},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, cpu_target: 1.5, idle_timeout: 1ms}\n",
			"c.yaml:4:42: services[0].autoscale.cpu_target: 1.5 not in (0, 1]\nc.yaml:4:61: services[0].autoscale.idle_timeout: \"1ms\" is not a duration in [1s, 24h0m0s]"},
		{"services:\n  - preset: ecs\n    upstream: http://x\n    autoscale: {command: sh}\n",
			"c.yaml:3:15: services[0].upstream: a service has an upstream or an autoscale pool, not both"},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh}\n  - name: b\n    route: {host: a.example}\n    autoscale: {command: sh}\n",
			"c.yaml:5:5: services[1].route: the same route as service \"a\""},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, request_timeout: 2h, max_pending: 0}\n",
			"c.yaml:4:47: services[0].autoscale.request_timeout: \"2h\" is not a duration in [1s, 1h0m0s] such as 30s\nc.yaml:4:64: services[0].autoscale.max_pending: 0 not in [1, 1000000]"},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, rollout_timeout: 0s}\n",
			"c.yaml:4:47: services[0].autoscale.rollout_timeout: \"0s\" is not a duration in [1s, 1h0m0s] such as 30s"},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, gpu: 1, idle_timeout: 15m}\n",
			"c.yaml:4:52: services[0].autoscale.idle_timeout: 15m0s is over 10m0s: with gpu (line 4), instances are kept idle 10 minutes at most"},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, gpu: 9}\n",
			"c.yaml:4:35: services[0].autoscale.gpu: 9 not in [0, 8]"},
		{"services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh, working_dir: nowhere}\n",
			"services[0].autoscale.working_dir: " + dir + "/nowhere is not a directory"},
	}
	for _, c := range cases {
		_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(c.yaml))
		if err == nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v", c.yaml, err)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml")
		if !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.yaml, got, c.want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"512Mi": 512 << 20, "1Gi": 1 << 30, "256M": 256e6, "4194304": 4 << 20, "1Ti": 1 << 40} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Mi", "1", "3Mi", "2Ti", "-5Mi", "1.5Gi", "10 Mi", "0x10Mi", "99999999999999Gi", "1e9"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, got)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"512Mi", "1Gi", "256M", "4194304", "", "-1", "9223372036854775807", "1Ti", "1Ki"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err == nil && (n < MinMemory || n > MaxMemory) {
			t.Fatalf("ParseBytes(%q) = %d, outside the bounds", s, n)
		}
	})
}
