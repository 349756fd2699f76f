package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
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
