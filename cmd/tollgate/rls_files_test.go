package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A named pipe in the rls config directory, held open by a writer that
// never writes, neither hangs the start (serve exits with an error naming
// it) nor, added later, the SIGHUP reload: the reload is refused, the old
// rules keep serving, and SIGTERM stops the server at once. Before the
// loader read regular files only, the start hung on the pipe and after
// SIGHUP the process outlived SIGTERM.
func TestServeRLSConfigWithAFIFO(t *testing.T) {
	dir := t.TempDir()
	rule := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// At start: refused with an error that names the pipe. The bound is
	// only there to fail instead of hanging the test run.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--rls-config", dir).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("serve hung at start on a FIFO in --rls-config: %s", out)
	}
	if err == nil || !strings.Contains(string(out), "pipe.yaml: not a regular file (a named pipe)") {
		t.Fatalf("start with a FIFO: %v: %s", err, out)
	}

	// On reload: rejected, the old rules serve, SIGTERM stops it.
	os.Remove(fifo)
	s := startServer(t, "--rls-config", dir, "--grpc-listen", "127.0.0.1:0")
	client := rlsClient(t, s)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	w2, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	s.cmd.Process.Signal(syscall.SIGHUP)
	line := s.waitLog(t, "envoy ratelimit config rejected")
	if !strings.Contains(line, "not a regular file (a named pipe)") {
		t.Errorf("rejection: %s", line)
	}
	r, err := client.ShouldRateLimit(context.Background(), edgeRequest("10.0.0.9"))
	if err != nil || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Fatalf("after the rejected reload: %v %v", r, err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP) // a second one, while nothing is pending
	s.waitLog(t, "envoy ratelimit config rejected")
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(t, s); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
}

// edgeRequest is one hit of domain edge's remote_address descriptor.
func edgeRequest(addr string) *rlspb.RateLimitRequest {
	return &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: addr}}},
	}}
}

// What a Kubernetes user switching from envoy ratelimit relies on: the
// probes (gRPC health "ratelimit", GET /healthcheck), POST /json, and a
// ConfigMap update applied without a signal; a bad update keeps the old
// rules and is counted.
func TestServeRLSKubernetesSurface(t *testing.T) {
	dir := t.TempDir()
	swap := func(gen, rule string) {
		t.Helper()
		d := filepath.Join(dir, "..gen"+gen)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "config.yaml"), []byte(rule), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink("..gen"+gen, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	rule := func(n int) string {
		return fmt.Sprintf("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", n)
	}
	swap("1", rule(2))
	if err := os.Symlink("..data/config.yaml", filepath.Join(dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--rls-config", dir, "--grpc-listen", "127.0.0.1:0")
	line := s.waitLog(t, "envoy rate limit service listening")
	grpcAddr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)[1]
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlspb.NewRateLimitServiceClient(conn)
	if r, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "ratelimit"}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc health ratelimit: %v %v", r, err)
	}
	resp, err := http.Get("http://" + s.addr + "/healthcheck")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthcheck: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post("http://"+s.addr+"/json", "application/json", strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"1.2.3.4"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"requestsPerUnit":2`) {
		t.Errorf("POST /json: %d %s", resp.StatusCode, body)
	}

	swap("2", rule(1000))
	s.waitLog(t, "envoy ratelimit config loaded")
	if r, err := client.ShouldRateLimit(context.Background(), edgeRequest("10.0.0.1")); err != nil || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1000 {
		t.Fatalf("after the ConfigMap swap: %v %v", r, err)
	}
	swap("3", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	s.waitLog(t, "envoy ratelimit config rejected")
	if r, err := client.ShouldRateLimit(context.Background(), edgeRequest("10.0.0.1")); err != nil || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1000 {
		t.Fatalf("after a bad swap: %v %v", r, err)
	}
	resp, err = http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `tollgate_rls_config_loads{result="error"} 1`) {
		t.Errorf("the rejected swap is not counted")
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(t, s); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// envoy ratelimit's documented layout, RUNTIME_ROOT=/srv/runtime_data/current
// with current a symbolic link a deploy renames a new link over: serve
// --rls-config current starts with v1's rules (it was refused, "not a
// regular file (a directory)"), and the swap to v2 is applied without a
// signal.
func TestServeRLSConfigThroughASwappedLink(t *testing.T) {
	rt := t.TempDir()
	for v, n := range map[string]int{"v1": 2, "v2": 1000} {
		if err := os.Mkdir(filepath.Join(rt, v), 0o755); err != nil {
			t.Fatal(err)
		}
		rule := fmt.Sprintf("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", n)
		if err := os.WriteFile(filepath.Join(rt, v, "config.yaml"), []byte(rule), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	current := filepath.Join(rt, "current")
	if err := os.Symlink("v1", current); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--rls-config", current, "--grpc-listen", "127.0.0.1:0")
	client := rlsClient(t, s)
	if r, err := client.ShouldRateLimit(context.Background(), edgeRequest("10.0.0.1")); err != nil || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Fatalf("v1: %v %v", r, err)
	}
	linkConfig(t, current, "v2")
	s.waitLog(t, "envoy ratelimit config loaded")
	if r, err := client.ShouldRateLimit(context.Background(), edgeRequest("10.0.0.1")); err != nil || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1000 {
		t.Fatalf("after the swap to v2: %v %v", r, err)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(t, s); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
