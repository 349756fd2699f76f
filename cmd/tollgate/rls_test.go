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
