package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testflags"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/quota"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckPresetECSPrintsEveryCategory(t *testing.T) {
	code, out, errs := runCmd("check", "--preset", "ecs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, row := range []string{
		"cluster-modify  20  1  CreateCluster DeleteCluster PutClusterCapacityProviders UpdateCluster UpdateClusterSettings",
		"agent-modify  200  120  RegisterContainerInstance SubmitAttachmentStateChanges SubmitContainerStateChange SubmitTaskStateChange",
		"cluster-service-resource-read  10  1  ListServicesByNamespace",
		"ThrottlingException",
		"task-set-modify  50  5  CreateTaskSet DeleteTaskSet UpdateServicePrimaryTaskSet UpdateTaskSet",
		"task-set-modify: inferred:",
		"alias: UpdateContainerInstancesStates = UpdateContainerInstancesState",
		"source: https://docs.aws.amazon.com/AmazonECS/",
	} {
		if !strings.Contains(squeeze(out), row) {
			t.Errorf("output lacks %q", row)
		}
	}
	// A row of actions for each category that lists some: AWS's 20 and
	// the 10 inferred (Fargate's 3, drawn by RunTask's body, are
	// TestCheckShowsFargateBuckets'; the unlisted operations' has none).
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if regexp.MustCompile(`^  [a-z-]+ +\d+ +\d+ +[A-Z]`).MatchString(line) {
			rows++
		}
	}
	ecs, _ := quota.Preset("ecs")
	want := 0
	for _, c := range ecs.Categories {
		if len(c.Actions) > 0 {
			want++
		}
	}
	if rows != want || want != 30 {
		t.Errorf("%d category rows, want %d (30):\n%s", rows, want, out)
	}
}

func TestCheckPresetCloudMap(t *testing.T) {
	code, out, _ := runCmd("check", "--preset", "cloudmap")
	if code != 0 || !strings.Contains(squeeze(out), "discover-instances  20000  1000  DiscoverInstances") || !strings.Contains(out, "RequestLimitExceeded") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestCheckBrokenFileListsEveryProblem(t *testing.T) {
	code, out, errs := runCmd("check", "testdata/broken.yaml")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	want := []string{
		"testdata/broken.yaml:3:13: services[1].preset: unknown preset \"sqs\"",
		"testdata/broken.yaml:7:19: services[2].categories[0].capacity: capacity 0 must be at least 1",
		"testdata/broken.yaml:8:28: services[2].categories[0].refill_per_second: refill_per_second -1 must be greater than 0",
		"testdata/broken.yaml:18:5: overrides[0].burst: unknown field",
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w || strings.HasPrefix(strings.TrimPrefix(l, "tollgate check: "), w)
		}
		if !found {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
}

func TestCheckUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"check"}, {"check", "--preset", "nope"}, {"check", "a.yaml", "b.yaml"}, {"frobnicate"}} {
		if code, _, _ := runCmd(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// Prefixed as every other error of check is.
	if code, _, errs := runCmd("check", "testdata/missing.yaml"); code != 1 || !strings.HasPrefix(errs, "tollgate check: ") || !strings.Contains(errs, "no such file") {
		t.Errorf("missing file: exit %d %s", code, errs)
	}
}

func squeeze(s string) string {
	return regexp.MustCompile(` {2,}`).ReplaceAllString(s, "  ")
}

// binary is the tollgate binary the process tests start: this test
// binary itself (see TestMain).
var binary string

// TestMain makes the test binary double as tollgate: started with a
// command (serve, check, instance-supervisor …) rather than the -test.
// flags go test gives it, it runs tollgate's main, so the process tests
// start the code under test without a go build of their own (which, with
// its link of a 100 MB binary, took a minute of the package's time on a
// loaded machine), and serve starts the same binary as its instance
// supervisor.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		main()
	}
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	binary = exe
	// Servers under test keep their state in memory unless a test gives
	// --data-dir (or sets this itself): they must not share the user's
	// data directory, nor one another's.
	os.Setenv("TOLLGATE_DATA_DIR", "")
	// The process tests wait on real servers' timers (the example's 20 s
	// idle timeout, reloads, outages) far more than they use the CPU, and
	// go test runs only GOMAXPROCS (2 here) parallel tests at once: the
	// example test then started 19 s into the package. Unless -parallel
	// is given, every parallel test starts at once.
	flag.Parse()
	testflags.ParallelDefault(32)
	code := m.Run()
	testservice.Remove()
	os.Exit(code)
}

// server is a `tollgate serve` process under test.
type server struct {
	cmd  *exec.Cmd
	addr string
	logs chan string

	mu   sync.Mutex
	tail []string // the last logTail lines, printed when the test fails
}

// logTail is how many of a server's last log lines a failed test prints.
const logTail = 60

// startServer starts `tollgate serve` on a random port and waits for its
// "listening" log line.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	return startServerEnv(t, nil, args...)
}

// startServerEnv is startServer with extra environment variables.
func startServerEnv(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(environWithout("TOLLGATE_ADMIN_TOKEN"), env...)
	return startCmd(t, cmd)
}

// startCmd starts a prepared `tollgate serve` command and waits for its
// "listening" log line.
func startCmd(t *testing.T, cmd *exec.Cmd) *server {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, logs: make(chan string, 100_000)} // never full in a test: a dropped line would be a missed one
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("the server's last %d log lines:\n%s", len(s.tail), strings.Join(s.tail, "\n"))
			s.mu.Unlock()
		}
	})
	sc := bufio.NewScanner(stderr)
	addrRe := regexp.MustCompile(`msg=listening addr=(\S+)`)
	deadline := time.After(30 * time.Second)
	found := make(chan string, 1)
	go func() {
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			if s.tail = append(s.tail, line); len(s.tail) > logTail {
				s.tail = s.tail[1:]
			}
			s.mu.Unlock()
			if m := addrRe.FindStringSubmatch(line); m != nil {
				found <- m[1]
			}
			select {
			case s.logs <- line:
			default:
			}
		}
		close(s.logs)
	}()
	select {
	case s.addr = <-found:
	case <-deadline:
		t.Fatal("server did not log its address within 30 s")
	}
	return s
}

// exitWithin waits up to d for the server to exit and says how it did,
// for a failure message.
func exitWithin(s *server, d time.Duration) string {
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return fmt.Sprintf("exited: %v", err)
	case <-time.After(d):
		return fmt.Sprintf("still running after %v", d)
	}
}

// waitLog waits for a log line containing substr.
func (s *server) waitLog(t *testing.T, substr string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-s.logs:
			if !ok {
				t.Fatalf("server exited before logging %q", substr)
			}
			if strings.Contains(line, substr) {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line with %q within 30 s", substr)
		}
	}
}

func take(t *testing.T, addr, body string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/v1/take", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeReloadsOnSIGHUPAndKeepsServingOnBadConfig(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	write := func(s string) {
		if err := os.WriteFile(cfgPath, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("services:\n  - preset: ecs\n")
	s := startServer(t, "--config", cfgPath)
	req := `{"service":"ecs","account":"1","region":"us-east-1","action":"DescribeClusters","tokens":60}`
	if status, body := take(t, s.addr, req); status != 400 || !strings.Contains(body, "exceeds the bucket's capacity 50") {
		t.Fatalf("take 60 under 50/20: %d %s", status, body)
	}
	write("services:\n  - preset: ecs\noverrides:\n  - {service: ecs, account: \"1\", category: cluster-read, capacity: 100, refill_per_second: 40}\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "config reloaded")
	if status, body := take(t, s.addr, req); status != 200 {
		t.Fatalf("take 60 after the quota increase: %d %s", status, body)
	}
	write("services:\n  - preset: ecs\n    capacity: 1\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	line := s.waitLog(t, "config reload rejected")
	if !strings.Contains(line, "tollgate.yaml:3:5: services[0].capacity: unknown field") {
		t.Errorf("rejection log lacks the file:line:field error: %s", line)
	}
	// The old config still serves: an account without the override is 50.
	if status, body := take(t, s.addr, strings.Replace(req, `"account":"1"`, `"account":"2"`, 1)); status != 400 {
		t.Fatalf("after a rejected reload: %d %s", status, body)
	}
}

func TestServeShutsDownGracefullyOnSIGTERM(t *testing.T) {
	upstream, arrived, release := blockingUpstream(t)
	s := startServer(t, "--config", proxiedConfig(t, upstream))
	result := make(chan error, 1)
	go func() { result <- sendECS(s.addr) }()
	<-arrived
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitLog(t, "shutting down")
	close(release)
	if err := <-result; err != nil {
		t.Fatalf("in-flight request during shutdown: %v", err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
}

func TestServeRejectsBadFlagsAndConfig(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--log-format", "xml"},
		{"serve", "--config", "testdata/broken.yaml"},
		{"serve", "--store", "etcd://x"},
		{"serve", "--listen", "256.0.0.1:bad"},
	} {
		if code, _, errs := runCmd(args...); code == 0 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
	// A bound of 0 or below is refused by name, not served as the default.
	for _, args := range [][]string{{"--max-body", "0"}, {"--max-body", "-1"}, {"--max-batch", "0"}} {
		code, _, errs := runCmd(append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
		if code == 0 || !strings.Contains(errs, args[0]+" "+args[1]+" must be at least 1") {
			t.Errorf("serve %v: exit %d, stderr %q", args, code, errs)
		}
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestServeAdminTokenFromFileOrEnvironment(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("from-file\n"), 0o600)
	for _, tc := range []struct {
		name  string
		env   []string
		args  []string
		token string
	}{
		{"file", nil, []string{"--admin-token-file", tokenFile}, "from-file"},
		{"environment", []string{"TOLLGATE_ADMIN_TOKEN=from-env"}, nil, "from-env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServerEnv(t, tc.env, tc.args...)
			url := "http://" + s.addr + "/v1/admin/reload"
			for token, want := range map[string]int{tc.token: 200, "wrong": 401, "": 401} {
				req, _ := http.NewRequest("POST", url, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("token %q: %d, want %d", token, resp.StatusCode, want)
				}
			}
		})
	}
	s := startServer(t) // no token: admin disabled
	if status, _ := get(t, "http://"+s.addr+"/v1/admin/bucket?service=ecs"); status != 404 {
		t.Errorf("admin without a token: %d, want 404", status)
	}
}

func TestRedisStoreRefusesLimitsItCannotHold(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "slow.yaml")
	os.WriteFile(cfg, []byte("services:\n  - name: slow\n    categories:\n      - {name: a, capacity: 1000000, refill_per_second: 0.001, actions: [Get]}\n"), 0o644)
	code, _, errs := runCmd("serve", "--config", cfg, "--store", "redis://127.0.0.1:1/0")
	if code != 1 || !strings.Contains(errs, "service slow category a: limit 1000000/0.001 takes longer than") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// blockingUpstream answers only when release is closed; arrived is closed
// when the first request reaches it.
func blockingUpstream(t *testing.T) (addr string, arrived, release chan struct{}) {
	t.Helper()
	arrived, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		<-release
		io.WriteString(w, `{}`)
	})}
	ln := listen(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), arrived, release
}

func proxiedConfig(t *testing.T, upstream string) string {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	os.WriteFile(cfgPath, []byte("services:\n  - preset: ecs\n    upstream: http://"+upstream+"\n"), 0o644)
	return cfgPath
}

// sendECS sends one ListClusters and reports any failure, including a
// status other than 200 or a body other than the upstream's.
func sendECS(addr string) error {
	req, _ := http.NewRequest("POST", "http://"+addr+"/", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.ListClusters")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "{}" {
		return fmt.Errorf("%s %s", resp.Status, b)
	}
	return nil
}

func TestServeShutdownIsBounded(t *testing.T) {
	upstream, arrived, release := blockingUpstream(t)
	defer close(release)
	s := startServer(t, "--config", proxiedConfig(t, upstream), "--shutdown-timeout", "300ms")
	go sendECS(s.addr)
	<-arrived
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitLog(t, "shutting down")
	err := s.cmd.Wait() // returns once the bound has passed, upstream still blocked
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve exited with %v; want exit status 1 after the shutdown bound", err)
	}
}

func TestServeDrainDelayReportsNotReady(t *testing.T) {
	s := startServer(t, "--drain-delay", "30s")
	if status, _ := get(t, "http://"+s.addr+"/readyz"); status != 200 {
		t.Fatalf("readyz before SIGTERM: %d", status)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitLog(t, "draining")
	if status, _ := get(t, "http://"+s.addr+"/readyz"); status != 503 {
		t.Fatalf("readyz while draining: %d, want 503", status)
	}
	if status, _ := get(t, "http://"+s.addr+"/healthz"); status != 200 {
		t.Fatalf("healthz while draining: %d, want 200 (still serving)", status)
	}
	s.cmd.Process.Signal(syscall.SIGTERM) // a second signal ends it at once
	if err := s.cmd.Wait(); err == nil {
		t.Fatal("serve exited cleanly after a second SIGTERM; want it killed")
	}
}

// TestCheckPrintsWarnings: a valid config with a warning (a cloud_map
// section and no cloudmap preset to answer Cloud Map's API) passes check,
// which prints the warning at its file:line:col on stderr.
func TestCheckPrintsWarnings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	cfg := "services:\n  - name: web\n    route: {path_prefix: /web/}\n    autoscale:\n      command: [sh]\n      cloud_map: {namespace: local, service: web}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCmd("check", path)
	if want := "warning: " + path + ":6:18: services[0].autoscale.cloud_map: "; code != 0 || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want 0 and one line starting %q", code, errs, want)
	}
	if err := os.WriteFile(path, []byte("services:\n  - preset: cloudmap\n"+cfg[len("services:\n"):]), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCmd("check", path); code != 0 || errs != "" {
		t.Fatalf("with the cloudmap preset: exit %d, stderr %q; want 0 and no warning", code, errs)
	}
}

// TestServeLogsConfigWarnings: serve logs the config's warnings at start
// and again on a reload that still has them.
func TestServeLogsConfigWarnings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	cfg := "services:\n  - name: web\n    route: {path_prefix: /web/}\n    autoscale:\n      command: [sh]\n      cloud_map: {namespace: local, service: web}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--config", path)
	line := s.waitLog(t, "config warning")
	if !strings.Contains(line, path+":6:18: services[0].autoscale.cloud_map") {
		t.Fatalf("warning line %q does not locate the cloud_map section", line)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "config warning") // the reloaded file's, before it is applied
	s.waitLog(t, "config reloaded")
}
