package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestRLSSection(t *testing.T) {
	c, err := Parse("/etc/tollgate/t.yaml", []byte(`services:
  - preset: ecs
rls:
  config_dir: ratelimit/config
  grpc_listen: 0.0.0.0:8081
  merge_domains: true
  shadow_mode: true
  response_headers: true
  limit_header: X-RateLimit-Limit
  remaining_header: X-RateLimit-Remaining
  reset_header: X-RateLimit-Reset
`))
	if err != nil {
		t.Fatal(err)
	}
	want := RLS{
		ConfigDir: "/etc/tollgate/ratelimit/config", GRPCListen: "0.0.0.0:8081",
		MergeDomains: true, ShadowMode: true, ResponseHeaders: true,
		LimitHeader: "X-RateLimit-Limit", RemainingHeader: "X-RateLimit-Remaining", ResetHeader: "X-RateLimit-Reset",
	}
	if got := c.RLS; got != want {
		t.Fatalf("rls = %+v\nwant %+v", got, want)
	}
	if Default().RLS != (RLS{}) {
		t.Error("the default config has an rls section")
	}
	c, err = Parse("t.yaml", []byte("services:\n  - preset: ecs\nrls:\n  config_dir: /srv/ratelimit\n"))
	if err != nil || c.RLS != (RLS{ConfigDir: "/srv/ratelimit"}) {
		t.Fatalf("absolute config_dir: %+v, %v", c.RLS, err)
	}
	// A relative config_dir is taken from the config file's directory,
	// wherever tollgate runs.
	c, err = Parse("conf/t.yaml", []byte("services:\n  - preset: ecs\nrls:\n  config_dir: rl\n"))
	if abs, _ := filepath.Abs("conf/rl"); err != nil || c.RLS.ConfigDir != abs {
		t.Fatalf("relative config_dir: %+v, %v", c.RLS, err)
	}
}

func TestRLSSectionErrors(t *testing.T) {
	_, err := Parse("t.yaml", []byte(`services:
  - preset: ecs
rls:
  config_dir: ""
  grpc_listen: 8081
  shadow_mode: sometimes
  response_headers: [yes]
  limit_header: "Rate Limit"
  reset_header: {}
  port: 9
`))
	var errs ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		`t.yaml:4:15: rls.config_dir: empty: name envoy ratelimit's config directory, or leave config_dir out`,
		`t.yaml:5:16: rls.grpc_listen: "8081" is not a host:port address such as 127.0.0.1:8081`,
		`t.yaml:6:16: rls.shadow_mode: want true or false, got "sometimes"`,
		`t.yaml:7:21: rls.response_headers: want true or false, got a list`,
		`t.yaml:8:17: rls.limit_header: "Rate Limit" is not a valid HTTP header name`,
		`t.yaml:9:17: rls.reset_header: want a string, got a mapping`,
		`t.yaml:10:3: rls.port: unknown field (known: config_dir, grpc_listen, limit_header, merge_domains, remaining_header, reset_header, response_headers, shadow_mode, tls)`,
	}
	if got := strings.Split(errs.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", errs.Error(), strings.Join(want, "\n"))
	}
	if _, err := Parse("t.yaml", []byte("services:\n  - preset: ecs\nrls: /srv/ratelimit\n")); err == nil || !strings.Contains(err.Error(), `t.yaml:3:6: rls: want a mapping, got "/srv/ratelimit"`) {
		t.Errorf("rls as a string: %v", err)
	}
}
