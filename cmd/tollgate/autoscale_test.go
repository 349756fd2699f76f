package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testservice"
)

// autoscaleConfig writes a config serving the test service under /t/ and
// returns its path; marker is put in every instance's environment, so the
// test can find their processes in /proc. With spawnChild each instance
// starts a child process of its own.
func autoscaleConfig(t *testing.T, marker string, spawnChild bool) string {
	t.Helper()
	bin := testservice.Build(t)
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	cfg := fmt.Sprintf(`services:
  - name: svc
    route: {path_prefix: /t/, strip_prefix: true}
    autoscale:
      command: [%q]
      env: {TOLLGATE_TEST_MARKER: %q, %s: "%t"}
      max_instances: 2
      termination_grace_period: 3s
`, bin, marker, testservice.EnvSpawnChild, spawnChild)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// markedProcesses lists the processes whose environment holds marker:
// every instance process and any child it started.
func markedProcesses(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	want := []byte("TOLLGATE_TEST_MARKER=" + marker + "\x00")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(env)+"\x00", string(want)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			s := string(stat)
			if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] == 'Z' {
				continue // a zombie has exited
			}
		}
		out = append(out, pid)
	}
	return out
}

func waitNoProcesses(t *testing.T, marker, after string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := markedProcesses(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance processes %v still running 30 s after %s", left, after)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getBody(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type adminPools struct {
	Services []struct {
		Name      string
		Instances []struct {
			Name  string
			State string
			PID   int
			Port  int
		}
	}
}

func listPools(t *testing.T, addr string) adminPools {
	t.Helper()
	code, body := getBody(t, "http://"+addr+"/v1/admin/pools", "Authorization", "Bearer secret")
	if code != 200 {
		t.Fatalf("admin pools: %d %s", code, body)
	}
	var ap adminPools
	if err := json.Unmarshal([]byte(body), &ap); err != nil {
		t.Fatalf("admin pools: %v in %s", err, body)
	}
	return ap
}

// TestServeAutoscaleSIGTERM: serve starts an instance for the first
// request under the route, lists it, keeps it across a reload that raises
// max instances, and leaves no instance process after SIGTERM.
func TestServeAutoscaleSIGTERM(t *testing.T) {
	marker := fmt.Sprintf("term-%d", time.Now().UnixNano())
	cfgPath := autoscaleConfig(t, marker, true)
	s := startServerEnv(t, []string{"TOLLGATE_ADMIN_TOKEN=secret"}, "--config", cfgPath)
	code, body := getBody(t, "http://"+s.addr+"/t/hello")
	if code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("first request under the route: %d %q", code, body)
	}
	s.waitLog(t, "instance ready")
	ap := listPools(t, s.addr)
	if len(ap.Services) != 1 || len(ap.Services[0].Instances) != 1 || ap.Services[0].Instances[0].PID == 0 {
		t.Fatalf("admin listing: %+v", ap)
	}
	first := ap.Services[0].Instances[0]
	if len(markedProcesses(marker)) < 2 { // the instance and its child
		t.Fatalf("instance processes: %v", markedProcesses(marker))
	}

	// A reload with new bounds keeps the instance.
	os.WriteFile(cfgPath, []byte(strings.Replace(mustRead(t, cfgPath), "max_instances: 2", "max_instances: 3", 1)), 0o644)
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "config reloaded")
	ap = listPools(t, s.addr)
	if len(ap.Services[0].Instances) != 1 || ap.Services[0].Instances[0].PID != first.PID {
		t.Fatalf("after a bounds reload: %+v, want instance %+v kept", ap, first)
	}
	// A reload naming a command that does not exist is rejected.
	os.WriteFile(cfgPath, []byte(strings.Replace(mustRead(t, cfgPath), testservice.Build(t), "/no/such/program", 1)), 0o644)
	s.cmd.Process.Signal(syscall.SIGHUP)
	line := s.waitLog(t, "config reload rejected")
	if !strings.Contains(line, "services[0].autoscale.command") {
		t.Errorf("rejection does not name the command: %s", line)
	}

	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
	waitNoProcesses(t, marker, "tollgate's SIGTERM")
}

// TestServeAutoscaleSIGKILL: when tollgate is killed outright, its
// instances die with it (parent-death signal). What an instance started
// itself is not covered: the parent-death signal reaches only the
// instance's main process (see package pool/process).
func TestServeAutoscaleSIGKILL(t *testing.T) {
	marker := fmt.Sprintf("kill-%d", time.Now().UnixNano())
	s := startServerEnv(t, []string{"TOLLGATE_ADMIN_TOKEN=secret"}, "--config", autoscaleConfig(t, marker, false))
	if code, body := getBody(t, "http://"+s.addr+"/t/"); code != 200 {
		t.Fatalf("first request: %d %q", code, body)
	}
	if len(markedProcesses(marker)) == 0 {
		t.Fatal("no instance process found")
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	waitNoProcesses(t, marker, "tollgate's SIGKILL")
}

func TestServeRejectsMissingCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	os.WriteFile(path, []byte("services:\n  - name: svc\n    route: {path_prefix: /t/}\n    autoscale: {command: [./nope]}\n"), 0o644)
	code, _, stderr := runCmd("serve", "--listen", "127.0.0.1:0", "--config", path)
	if code != 1 || !strings.Contains(stderr, "tollgate.yaml:4:26: services[0].autoscale.command: \"./nope\" cannot be run") {
		t.Fatalf("serve with a missing command: exit %d, %s", code, stderr)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServeThrottledServiceOnPool: a preset service with an autoscale
// section passes throttle → pending queue → instance in one process.
func TestServeThrottledServiceOnPool(t *testing.T) {
	marker := fmt.Sprintf("ecs-%d", time.Now().UnixNano())
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	cfg := fmt.Sprintf("services:\n  - preset: ecs\n    autoscale: {command: [%q], env: {TOLLGATE_TEST_MARKER: %q}, max_instances: 1}\n", testservice.Build(t), marker)
	os.WriteFile(path, []byte(cfg), 0o644)
	s := startServer(t, "--config", path)
	send := func() (int, string) {
		req, _ := http.NewRequest("POST", "http://"+s.addr+"/", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.ListClusters")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The cluster-read bucket holds 50 and refills 20 a second: the first
	// 50 reach the instance (the first one starting it); a burst beyond
	// that meets the throttle, which answers without the instance.
	for i := range 50 {
		if code, body := send(); code != 200 || !strings.HasPrefix(body, "ok ") {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	throttled := false
	for range 500 {
		code, body := send()
		if code == 400 && strings.Contains(body, "ThrottlingException") {
			throttled = true
			break
		}
		if code != 200 {
			t.Fatalf("in the burst: %d %q", code, body)
		}
	}
	if !throttled {
		t.Fatal("550 requests in a burst against a 50/20 bucket were never throttled")
	}
	if len(markedProcesses(marker)) == 0 {
		t.Fatal("no instance process behind the throttled service")
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	waitNoProcesses(t, marker, "tollgate's SIGTERM")
}

// TestExampleAutoscale runs examples/autoscale as the README says (from
// the repository root): the first request under /hello/ starts an
// instance (with go run) and is answered by it.
func TestExampleAutoscale(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command: the example runs its service with go run")
	}
	root, _ := filepath.Abs("../..")
	cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--config", "examples/autoscale/tollgate.yaml")
	cmd.Dir = root
	s := startCmd(t, cmd)
	code, body := getBody(t, "http://"+s.addr+"/hello/there")
	if code != 200 || !strings.HasPrefix(body, "Hello from hello (revision hello-00001") || !strings.Contains(body, "path /there") {
		t.Fatalf("GET /hello/there: %d %q", code, body)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
}
