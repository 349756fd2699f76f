package testservice_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testservice"
)

func TestMain(m *testing.M) { testservice.Main(m) }

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// start runs the service with env added and returns its base URL and a
// channel receiving its exit.
func start(t *testing.T, env ...string) (string, *exec.Cmd, chan error) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(testservice.Build(t))
	cmd.Env = append(os.Environ(), append([]string{"PORT=" + port, testservice.EnvHost + "=127.0.0.1"}, env...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	waited := make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(waited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
	})
	base := "http://127.0.0.1:" + port
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("testservice exited before listening: %v", err)
		default:
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return base, cmd, exited
		}
		if time.Now().After(deadline) {
			t.Fatal("testservice did not listen within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServesPortEnvAndHealth(t *testing.T) {
	base, cmd, _ := start(t, "K_SERVICE=hello")
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	_, body := get(t, base+"/env")
	var env map[string]string
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("/env: %v: %s", err, body)
	}
	if env["K_SERVICE"] != "hello" {
		t.Errorf("/env K_SERVICE = %q", env["K_SERVICE"])
	}
	if code, body := get(t, base+"/work"); code != 200 || body != fmt.Sprintf("ok %d\n", cmd.Process.Pid) {
		t.Errorf("/work = %d %q", code, body)
	}
}

func TestHealthyAfter(t *testing.T) {
	base, _, _ := start(t, testservice.EnvHealthyAfter+"=1h")
	if code, _ := get(t, base+"/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz before healthy-after = %d, want 503", code)
	}
}

// TestSicken: /sicken makes /healthz answer 500 from then on, and
// /sicken?hang=1 makes it give no answer, as a liveness probe sees a
// deadlocked service; other paths still answer.
func TestSicken(t *testing.T) {
	base, _, _ := start(t)
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz before /sicken = %d", code)
	}
	if code, body := get(t, base+"/sicken"); code != 200 || body != "sick\n" {
		t.Fatalf("/sicken = %d %q", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusInternalServerError {
		t.Fatalf("/healthz after /sicken = %d, want 500", code)
	}
	if code, _ := get(t, base+"/work"); code != 200 {
		t.Fatalf("/work after /sicken = %d", code)
	}
	get(t, base+"/sicken?hang=1")
	c := &http.Client{Timeout: 500 * time.Millisecond}
	if resp, err := c.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("/healthz after /sicken?hang=1 answered %d, want no answer", resp.StatusCode)
	}
}

func TestCrashAfter(t *testing.T) {
	base, _, exited := start(t, testservice.EnvCrashAfter+"=2")
	get(t, base+"/healthz") // not counted
	get(t, base+"/a")
	select {
	case err := <-exited:
		t.Fatalf("exited after 1 request: %v", err)
	default:
	}
	get(t, base+"/b")
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("exit = %v, want status 1", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not exit within 30s after 2 requests")
	}
}

func TestSIGTERM(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore=%v", ignore), func(t *testing.T) {
			_, cmd, exited := start(t, testservice.EnvIgnoreSIGTERM+"="+strconv.FormatBool(ignore))
			_ = cmd.Process.Signal(syscall.SIGTERM)
			// Exiting is waited for as long as a loaded machine may need;
			// ignoring is watched for 2 s (a process that meant to exit
			// would have begun to by then).
			wait := 30 * time.Second
			if ignore {
				wait = 2 * time.Second
			}
			select {
			case err := <-exited:
				if ignore {
					t.Fatalf("exited on SIGTERM though ignoring it: %v", err)
				}
				if err != nil {
					t.Errorf("exit after SIGTERM = %v, want status 0", err)
				}
			case <-time.After(wait):
				if !ignore {
					t.Fatalf("still running %v after SIGTERM", wait)
				}
			}
		})
	}
}

func TestCPUBurn(t *testing.T) {
	base, cmd, _ := start(t)
	get(t, base+"/?cpu=300ms")
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Skip("no /proc:", err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	if ticks := utime + stime; ticks < 25 { // 100 ticks a second
		t.Errorf("CPU after a 300ms burn = %d ticks, want ≥ 25", ticks)
	}
}
