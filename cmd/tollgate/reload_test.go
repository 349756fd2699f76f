package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/logtest"
)

// linkConfig points the symlink at link to target, atomically, the way a
// deploy swaps a config.
func linkConfig(t *testing.T, link, target string) {
	t.Helper()
	tmp := link + ".tmp"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits for the server process to exit; the bound only keeps a
// hung process from hanging the test run.
func waitExit(t *testing.T, s *server) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("serve still running 60 s after SIGTERM")
		return nil
	}
}

// TestServeShutsDownWhileAReloadHangs swaps the config for a FIFO that a
// writer holds open and never writes, sends SIGHUP (the reload blocks
// reading it), then SIGTERM: the server shuts down at once, ending the
// reload, instead of ignoring the signal or waiting out the reload's
// 10 s bound.
func TestServeShutsDownWhileAReloadHangs(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("services:\n  - preset: ecs\n"), 0o644)
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "tollgate.yaml")
	linkConfig(t, link, good)
	s := startServer(t, "--config", link)
	linkConfig(t, link, fifo)
	// A writer that never writes: reads of the FIFO wait for data.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "SIGHUP: reloading config")
	waitOpen(t, s.cmd.Process.Pid, fifo) // the reload now waits for data
	s.cmd.Process.Signal(syscall.SIGTERM)
	line := s.waitLog(t, "config reload rejected")
	if !strings.Contains(line, "reading stopped: shutting down") {
		t.Errorf("the hung reload did not end with shutdown: %s", line)
	}
	s.waitLog(t, "msg=stopped")
	if err := waitExit(t, s); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM during a hung reload", err)
	}
}

// TestServeRefusesOversizedConfig: a config over 4 MiB, or one that never
// ends (/dev/zero), is refused with a clear error at start, and on reload
// the old config keeps serving without the server's memory growing.
func TestServeRefusesOversizedConfig(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, append([]byte("services:\n  - preset: ecs\n"), bytes.Repeat([]byte("# padding\n"), 500_000)...), 0o644)
	for _, tc := range []struct{ path, want string }{
		{big, "config " + big + " is too large: 5000026 bytes, more than the 4 MiB allowed"},
		{"/dev/zero", "config /dev/zero is too large: more than the 4 MiB allowed"},
	} {
		// A process of its own: without the bound, reading /dev/zero
		// grows until the kernel kills it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, binary, "serve", "--listen", "127.0.0.1:0", "--config", tc.path).CombinedOutput()
		cancel()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("serve --config %s: %v, output %q; want exit 1 and %q", tc.path, err, out, tc.want)
		}
	}

	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("services:\n  - preset: ecs\noverrides:\n  - {service: ecs, account: \"1\", category: cluster-read, capacity: 100, refill_per_second: 40}\n"), 0o644)
	link := filepath.Join(dir, "tollgate.yaml")
	linkConfig(t, link, good)
	s := startServer(t, "--config", link)
	req := `{"service":"ecs","account":"1","region":"us-east-1","action":"DescribeClusters"}`
	for _, target := range []string{"/dev/zero", big} {
		linkConfig(t, link, target)
		s.cmd.Process.Signal(syscall.SIGHUP)
		line := s.waitLog(t, "config reload rejected")
		if !strings.Contains(line, "is too large") || !strings.Contains(line, "4 MiB") {
			t.Errorf("reload of %s: %s", target, line)
		}
		// The override of the old config still holds.
		if status, body := take(t, s.addr, req); status != 200 || !strings.Contains(body, `"limit":{"capacity":100,"refill_per_second":40}`) {
			t.Fatalf("after the rejected reload of %s: %d %s", target, status, body)
		}
		if rss := rssBytes(t, s.cmd.Process.Pid); rss > 200<<20 {
			t.Errorf("after the reload of %s the server's RSS is %d MiB", target, rss>>20)
		}
	}
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// TestServeAdminTokenIsTrimmedAndNeverEmpty: the token from the
// environment is trimmed like the token file's, and an empty one (after
// trimming) is refused at start rather than locking everyone out.
func TestServeAdminTokenIsTrimmedAndNeverEmpty(t *testing.T) {
	s := startServerEnv(t, []string{"TOLLGATE_ADMIN_TOKEN=tok123\n"})
	if status, err := httpPost("http://"+s.addr+"/v1/admin/reload", "tok123"); err != nil || status != 200 {
		t.Errorf("token tok123 against TOLLGATE_ADMIN_TOKEN=$'tok123\\n': %d %v, want 200", status, err)
	}
	empty := filepath.Join(t.TempDir(), "token")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"TOLLGATE_ADMIN_TOKEN="}, nil, "TOLLGATE_ADMIN_TOKEN is set but empty"},
		{[]string{"TOLLGATE_ADMIN_TOKEN= \n"}, nil, "TOLLGATE_ADMIN_TOKEN is set but empty"},
		{nil, []string{"--admin-token-file", empty}, "--admin-token-file " + empty + " is empty"},
	} {
		// A server that starts anyway is killed after a minute.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, tc.args...)...)
		cmd.Env = append(environWithout("TOLLGATE_ADMIN_TOKEN"), tc.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%q %v: %v, output %q; want exit 1 and %q", tc.env, tc.args, err, out, tc.want)
		}
	}
}

// environWithout is the test's environment without the named variables.
func environWithout(names ...string) []string {
	var env []string
outer:
	for _, kv := range os.Environ() {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue outer
			}
		}
		env = append(env, kv)
	}
	return env
}

// httpPost sends an empty POST with a bearer token and returns the status.
func httpPost(url, token string) (int, error) {
	req, err := http.NewRequest("POST", url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestServeRunsAndStopsInProcess drives serve through its signal channel:
// a SIGHUP reloads in the worker, a SIGTERM shuts down, stopSignals is
// called once shutdown starts, and serve returns nil only after the
// server has stopped (the race detector watches its goroutines).
func TestServeRunsAndStopsInProcess(t *testing.T) {
	var f serveFlags
	fs := newFlagSet("serve")
	f.define(fs)
	if err := fs.Parse([]string{"--listen", "127.0.0.1:0", "--config", writeConfig(t, "services:\n  - preset: ecs\n")}); err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 2)
	var logs logtest.Buffer
	stopped := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- serve(context.Background(), f, sigs, func() { close(stopped) }, &logs)
	}()
	waitForLog(t, &logs, "msg=listening")
	sigs <- syscall.SIGHUP
	waitForLog(t, &logs, "config reloaded")
	sigs <- syscall.SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve still running 60 s after SIGTERM:\n%s", logs.String())
	}
	select {
	case <-stopped:
	default:
		t.Error("stopSignals was not called")
	}
	if !strings.Contains(logs.String(), "msg=stopped") {
		t.Errorf("no \"stopped\" log line:\n%s", logs.String())
	}
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls the logs for substr, for up to 30 s.
func waitForLog(t *testing.T, logs *logtest.Buffer, substr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), substr); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the logs within 30 s:\n%s", substr, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOpen waits, for up to 30 s, until process pid has the file at path
// open.
func waitOpen(t *testing.T, pid int, path string) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		fds, err := os.ReadDir(dir)
		if err != nil {
			t.Skipf("no /proc: %v", err)
		}
		for _, fd := range fds {
			if target, _ := os.Readlink(filepath.Join(dir, fd.Name())); target == path {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not open %s within 30 s", pid, path)
		}
	}
}
