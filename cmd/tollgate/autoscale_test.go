package main

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/aws/aws-sdk-go-v2/aws"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"

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
	t.Parallel() // its own servers, files and markers
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

	// SIGTERM while a request runs on the instance: it is finished, then
	// the instance (and the child it started) is stopped.
	result := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + s.addr + "/t/slow?latency=2s")
		if err != nil {
			result <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- strconv.Itoa(resp.StatusCode) + " " + string(b)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(mustAdmin(t, s.addr), `"in_flight": 1`) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if got := <-result; !strings.HasPrefix(got, "200 ok ") {
		t.Fatalf("request in flight at SIGTERM: %s (serve then %s)", got, exitWithin(s, 10*time.Second))
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
	waitNoProcesses(t, marker, "tollgate's SIGTERM")
}

func mustAdmin(t *testing.T, addr string) string {
	t.Helper()
	_, body := getBody(t, "http://"+addr+"/v1/admin/pools", "Authorization", "Bearer secret")
	return body
}

// TestServeAutoscaleSIGKILL: when tollgate is killed outright, its
// instances die with it, and so does every process they started: one in
// the instance's process group and one in a session of its own (a
// daemon), which only the instance supervisor can find without a cgroup.
func TestServeAutoscaleSIGKILL(t *testing.T) {
	t.Parallel() // its own servers, files and markers
	for _, session := range []bool{false, true} {
		t.Run(fmt.Sprintf("childSession=%v", session), func(t *testing.T) {
			marker := fmt.Sprintf("kill-%d", time.Now().UnixNano())
			cfgPath := autoscaleConfig(t, marker, true)
			cfg := strings.Replace(mustRead(t, cfgPath), "env: {", fmt.Sprintf("env: {%s: \"%t\", ", testservice.EnvChildSession, session), 1)
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			s := startServerEnv(t, []string{"TOLLGATE_ADMIN_TOKEN=secret"}, "--config", cfgPath)
			if code, body := getBody(t, "http://"+s.addr+"/t/"); code != 200 {
				t.Fatalf("first request: %d %q", code, body)
			}
			// The supervisor, the instance and its child.
			if left := markedProcesses(marker); len(left) < 3 {
				t.Fatalf("instance processes %v, want the supervisor, the instance and its child", left)
			}
			t.Cleanup(func() {
				for _, pid := range markedProcesses(marker) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			s.cmd.Process.Kill()
			s.cmd.Wait()
			waitNoProcesses(t, marker, "tollgate's SIGKILL")
		})
	}
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
	t.Parallel() // its own servers, files and markers
	marker := fmt.Sprintf("ecs-%d", time.Now().UnixNano())
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	cfg := fmt.Sprintf("services:\n  - preset: ecs\n    autoscale: {command: [%q], env: {TOLLGATE_TEST_MARKER: %q}, max_instances: 1}\n", testservice.Build(t), marker)
	os.WriteFile(path, []byte(cfg), 0o644)
	s := startServerEnv(t, []string{"TOLLGATE_ADMIN_TOKEN=secret"}, "--config", path)
	send := func() (int, string) {
		req, _ := http.NewRequest("POST", "http://"+s.addr+"/", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.ListClusters")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
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
	// Bursts of 100 at once: all allowed only if they took 5 s to
	// arrive, which not even a loaded machine takes.
	throttled := false
	for round := 0; round < 5 && !throttled; round++ {
		type answer struct {
			code int
			body string
		}
		answers := make(chan answer, 100)
		for range 100 {
			go func() {
				code, body := send()
				answers <- answer{code, body}
			}()
		}
		for range 100 {
			a := <-answers
			switch {
			case a.code == 400 && strings.Contains(a.body, "ThrottlingException"):
				throttled = true
			case a.code != 200:
				t.Errorf("in the burst: %d %q", a.code, a.body)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if !throttled {
		t.Fatal("550 requests in bursts of 100 against a 50/20 bucket were never throttled")
	}
	if len(markedProcesses(marker)) == 0 {
		t.Fatal("no instance process behind the throttled service")
	}
	checkLiveView(t, s.addr)
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	waitNoProcesses(t, marker, "tollgate's SIGTERM")
}

// TestExampleAutoscale runs examples/autoscale as the README says (from
// the repository root): the first request under /hello/ starts an
// instance (with go run) and is answered by it; the instance is listed in
// Cloud Map while it runs and no longer once it has idled away.
func TestExampleAutoscale(t *testing.T) {
	t.Parallel() // its own servers, files and markers
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
	client := sdClient(s.addr, "AKIDEXAMPLE")
	listed := func() int {
		out, err := client.DiscoverInstances(context.Background(), &sd.DiscoverInstancesInput{NamespaceName: aws.String("example.local"), ServiceName: aws.String("hello")})
		var nf *types.NamespaceNotFound
		if errors.As(err, &nf) { // made at the first registration
			return 0
		}
		if err != nil {
			t.Fatalf("DiscoverInstances: %v", err)
		}
		return len(out.Instances)
	}
	// Listed once ready (the registrar follows the pool by a moment);
	// idled away 20 s after the request (idle_timeout).
	for deadline := time.Now().Add(15 * time.Second); listed() != 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the example's instance answered, but %d are listed in Cloud Map", listed())
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); listed() != 0; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("the example's instance is still listed in Cloud Map 2 min after its last request")
		}
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
}

// checkLiveView waits (the live view closes a second at a time) until the
// live endpoints of a real server show what TestServeThrottledServiceOnPool
// did: the throttled AKID bucket hottest, and the ecs pool with a ready
// instance and its scale-from-zero decision.
func checkLiveView(t *testing.T, addr string) {
	t.Helper()
	var hot struct {
		Buckets []struct{ Account, Category string }
	}
	var scaled struct {
		Services []struct {
			Name           string
			Instances      map[string][]int
			Recommended    []int
			ScaleDecisions []struct {
				From, To int
				Reason   string
			} `json:"scale_decisions"`
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, hb := getBody(t, "http://"+addr+"/v1/admin/live/hot", "Authorization", "Bearer secret")
		_, sb := getBody(t, "http://"+addr+"/v1/admin/live/autoscaled", "Authorization", "Bearer secret")
		json.Unmarshal([]byte(hb), &hot)
		json.Unmarshal([]byte(sb), &scaled)
		ok := len(hot.Buckets) > 0 && hot.Buckets[0].Account == "AKID" && hot.Buckets[0].Category == "cluster-read" &&
			len(scaled.Services) == 1 && scaled.Services[0].Name == "ecs"
		if ok {
			s := scaled.Services[0]
			ready := s.Instances["ready"]
			ok = len(ready) > 0 && ready[len(ready)-1] == 1 && len(s.ScaleDecisions) > 0 &&
				s.ScaleDecisions[0].From == 0 && s.ScaleDecisions[0].To == 1 && strings.Contains(s.ScaleDecisions[0].Reason, " in flight on ")
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live view never showed the throttled AKID bucket and the ecs pool's instance:\nhot: %s\nautoscaled: %s", hb, sb)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
