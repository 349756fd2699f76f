package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
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
// test can find their processes in /proc.
func autoscaleConfig(t *testing.T, marker string, extra string) string {
	t.Helper()
	bin := testservice.Build(t)
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	cfg := fmt.Sprintf(`services:
  - name: svc
    route: {path_prefix: /t/, strip_prefix: true}
    autoscale:
      command: [%q]
      env: {TOLLGATE_TEST_MARKER: %q, %s: "1"}
      max_instances: 2
      termination_grace_period: 3s
%s`, bin, marker, testservice.EnvSpawnChild, extra)
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
	cfgPath := autoscaleConfig(t, marker, "")
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
// instances die with it (parent-death signal).
func TestServeAutoscaleSIGKILL(t *testing.T) {
	marker := fmt.Sprintf("kill-%d", time.Now().UnixNano())
	s := startServerEnv(t, []string{"TOLLGATE_ADMIN_TOKEN=secret"}, "--config", autoscaleConfig(t, marker, ""))
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
