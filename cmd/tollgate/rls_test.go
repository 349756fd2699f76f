package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/rls"
)

// `tollgate serve --rls-config DIR` answers Envoy's rate limit protocol
// from envoy ratelimit's config directory and reloads it on SIGHUP.
func TestServeEnvoyRateLimitService(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	s := startServer(t, "--rls-config", dir, "--grpc-listen", "127.0.0.1:0", "--rls-response-headers")
	line := s.waitLog(t, "envoy rate limit service listening")
	m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no address in %q", line)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlspb.NewRateLimitServiceClient(conn)
	addr := "10.0.0.1"
	call := func() *rlspb.RateLimitResponse {
		t.Helper()
		r, err := client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: addr}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := call(); r.OverallCode != rlspb.RateLimitResponse_OK || len(r.ResponseHeadersToAdd) != 3 {
		t.Fatalf("first call: %v", r)
	}
	call()
	if r := call(); r.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("third call under 2/min: %v", r)
	}
	write("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "envoy ratelimit config loaded")
	// The spent bucket keeps its state (full again in a minute); another
	// address sees the new limit.
	addr = "10.0.0.2"
	if r := call(); r.OverallCode != rlspb.RateLimitResponse_OK || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1000 {
		t.Fatalf("after reload: %v", r)
	}
	write("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: lightyear, requests_per_unit: 1}\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	line = s.waitLog(t, "envoy ratelimit config rejected")
	if !strings.Contains(line, `config.yaml:4:24: descriptors[0].rate_limit.unit: invalid rate limit unit \"lightyear\"`) {
		t.Errorf("rejection log lacks the file:line:col: field error: %s", line)
	}
	if r := call(); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1000 {
		t.Fatalf("after a rejected reload: %v", r)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
}

// A limit the Redis store cannot hold is refused when the file loads.
func TestServeRLSRefusesYearOnRedis(t *testing.T) {
	t.Parallel() // its own servers, files and markers
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "y.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCmd("serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--store", "redis://127.0.0.1:1", "--store-timeout", "10ms", "--rls-config", dir)
	if code != 1 || !strings.Contains(errs, "y.yaml:4:24: descriptors[0].rate_limit.unit: 5 per year refills over 365 days, longer than the 52.1 days the store holds") {
		t.Errorf("exit %d: %s", code, errs)
	}
	code, _, errs = runCmd("serve", "--listen", "127.0.0.1:0", "--rls-config", filepath.Join(dir, "missing"))
	if code != 1 || !strings.Contains(errs, "--rls-config") {
		t.Errorf("missing directory: exit %d: %s", code, errs)
	}
}

// rlsClient connects to the Envoy rate limit service whose "listening"
// log line s printed.
func rlsClient(t *testing.T, s *server) rlspb.RateLimitServiceClient {
	t.Helper()
	line := s.waitLog(t, "envoy rate limit service listening")
	m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no address in %q", line)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn)
}

// headerNames returns the names of the headers an answer asks Envoy to
// add.
func headerNames(r *rlspb.RateLimitResponse) []string {
	var out []string
	for _, h := range r.GetResponseHeadersToAdd() {
		out = append(out, h.GetKey())
	}
	return out
}

// The rls section of tollgate's own config runs the service as the flags
// do: config_dir relative to the config file, header names as envoy
// ratelimit's LIMIT_*_HEADER settings; each flag given wins over the
// file.
func TestServeRLSFromConfigFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "rl"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("rl/config.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	cfg := write("tollgate.yaml", `services:
  - preset: ecs
rls:
  config_dir: rl
  grpc_listen: 127.0.0.1:0
  shadow_mode: true
  response_headers: true
  limit_header: X-RateLimit-Limit
  remaining_header: X-RateLimit-Remaining
`)
	req := &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
	}}
	call := func(c rlspb.RateLimitServiceClient) *rlspb.RateLimitResponse {
		t.Helper()
		r, err := c.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// From the file alone: shadow mode answers OK past the limit, with
	// the file's header names (reset keeps envoy ratelimit's default).
	s := startServer(t, "--config", cfg)
	c := rlsClient(t, s)
	call(c)
	r := call(c)
	if r.OverallCode != rlspb.RateLimitResponse_OK || r.Statuses[0].GetLimitRemaining() != 0 {
		t.Errorf("second call in shadow mode: %v", r)
	}
	if got := strings.Join(headerNames(r), ","); got != "X-RateLimit-Limit,X-RateLimit-Remaining,RateLimit-Reset" {
		t.Errorf("headers %s", got)
	}
	// SIGHUP reloads the directory named by the file; a changed rls
	// section waits for a restart, and says so.
	write("rl/config.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n")
	write("tollgate.yaml", "services:\n  - preset: ecs\nrls:\n  config_dir: rl\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "rls settings take effect on restart")
	s.waitLog(t, "envoy ratelimit config loaded")
	req.Descriptors[0].Entries[0].Value = "10.0.0.2"
	if r := call(c); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1000 || len(r.ResponseHeadersToAdd) != 3 {
		t.Errorf("after SIGHUP: %v", r)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()

	write("tollgate.yaml", `services:
  - preset: ecs
rls:
  config_dir: rl
  grpc_listen: 127.0.0.1:0
  shadow_mode: true
  response_headers: true
`)
	// Flags win: no shadow mode, no headers, another reset header name
	// (ignored with headers off), another directory.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "c.yaml"), []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, "--config", cfg, "--rls-config", other, "--rls-shadow-mode=false", "--rls-response-headers=false", "--rls-reset-header", "X-RateLimit-Reset")
	c = rlsClient(t, s)
	call(c)
	if r := call(c); r.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || len(r.ResponseHeadersToAdd) != 0 {
		t.Errorf("second call with the flags: %v", r)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()

	// A bad config_dir names the config file and the field.
	bad := write("bad.yaml", "services:\n  - preset: ecs\nrls:\n  config_dir: missing\n")
	code, _, errs := runCmd("serve", "--listen", "127.0.0.1:0", "--config", bad)
	if code != 1 || !strings.Contains(errs, bad+": rls.config_dir: ") || !strings.Contains(errs, "missing") {
		t.Errorf("missing config_dir: exit %d: %s", code, errs)
	}
	code, _, errs = runCmd("serve", "--listen", "127.0.0.1:0", "--config", cfg, "--rls-limit-header", "Rate Limit")
	if code != 1 || !strings.Contains(errs, `--rls-limit-header "Rate Limit" is not a valid HTTP header name`) {
		t.Errorf("bad header flag: exit %d: %s", code, errs)
	}
}

// The README's rls section parses, and its header names are envoy
// ratelimit's defaults, which the service also uses.
func TestReadmeRLSSectionParses(t *testing.T) {
	_, block, ok := strings.Cut(docSection(t, "Use tollgate as Envoy's rate limit service"), "```yaml\nrls:\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README has no ```yaml block starting with rls:")
	}
	cfg, err := config.Parse("README.md", []byte("services: [{preset: ecs}]\nrls:\n"+block))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.RLS
	if got.LimitHeader != rls.DefaultLimitHeader || got.RemainingHeader != rls.DefaultRemainingHeader || got.ResetHeader != rls.DefaultResetHeader {
		t.Errorf("README's header names %+v are not the service's defaults", got)
	}
}
