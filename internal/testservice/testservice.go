// Package testservice builds the test service that pool tests run as
// instances: an HTTP server honouring $PORT with knobs for per-request
// latency and CPU burn, startup delay, crashing after N requests and
// ignoring SIGTERM. The knobs are documented on the command
// (internal/testservice/cmd/testservice) and named by the Env constants
// here.
//
// [Build] compiles it once per test binary with the go command that runs
// the tests (and the test's GOFLAGS, as the environment is inherited).
package testservice

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Environment variables the service reads as defaults for its flags.
const (
	// EnvLatency is how long every request waits (a Go duration).
	EnvLatency = "TESTSERVICE_LATENCY"
	// EnvCPU is how much CPU time every request burns (a Go duration).
	EnvCPU = "TESTSERVICE_CPU"
	// EnvStartupDelay is how long the service waits before listening.
	EnvStartupDelay = "TESTSERVICE_STARTUP_DELAY"
	// EnvHealthyAfter is how long after listening /healthz starts to
	// answer 200 (503 before).
	EnvHealthyAfter = "TESTSERVICE_HEALTHY_AFTER"
	// EnvCrashAfter makes the service exit with status 1 after serving
	// that many requests (not counting /healthz, /env, /pids, /log).
	EnvCrashAfter = "TESTSERVICE_CRASH_AFTER"
	// EnvIgnoreSIGTERM set to 1 makes the service ignore SIGTERM.
	EnvIgnoreSIGTERM = "TESTSERVICE_IGNORE_SIGTERM"
	// EnvSpawnChild set to 1 makes the service start a child process (in
	// its process group) that sleeps until killed; /pids lists it.
	EnvSpawnChild = "TESTSERVICE_SPAWN_CHILD"
	// EnvChildSession set to 1 (with EnvSpawnChild) starts the child in a
	// session of its own (setsid), out of the service's process group, as
	// a daemon would.
	EnvChildSession = "TESTSERVICE_CHILD_SESSION"
	// EnvExit set to a status makes the service exit with it at once,
	// before listening.
	EnvExit = "TESTSERVICE_EXIT"
	// EnvHost is the host the service listens on (default: all).
	EnvHost = "TESTSERVICE_HOST"
)

// Package is the import path of the service's main package.
const Package = "github.com/tollgate/tollgate/internal/testservice/cmd/testservice"

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Build compiles the test service once per test binary and returns the
// path of the executable. It fails tb when the build fails and skips it
// when no go command is found (it is, under go test). The binary lives in
// a temporary directory that [Remove] deletes; call it from TestMain
// after m.Run, or use [Main].
func Build(tb testing.TB) string {
	tb.Helper()
	path, err := Path()
	if errors.Is(err, exec.ErrNotFound) {
		tb.Skipf("testservice: %v", err)
	}
	if err != nil {
		tb.Fatalf("testservice: %v", err)
	}
	return path
}

// Path is [Build] for code without a testing.TB (examples, TestMain): it
// compiles the service once per process and returns the executable's path
// or why it could not be built.
func Path() (string, error) {
	built.once.Do(func() { built.dir, built.path, built.err = build() })
	return built.path, built.err
}

// Remove deletes the binary [Build] made, if any.
func Remove() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// Main runs the tests of m, removes the binary [Build] made and exits
// with the tests' status. Use it as
//
//	func TestMain(m *testing.M) { testservice.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	Remove()
	os.Exit(code)
}

func build() (dir, path string, err error) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go") // the go command running the tests
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			return "", "", fmt.Errorf("building %s: %w", Package, err)
		}
	}
	dir, err = os.MkdirTemp("", "tollgate-testservice-")
	if err != nil {
		return "", "", fmt.Errorf("building %s: %w", Package, err)
	}
	path = filepath.Join(dir, "testservice")
	cmd := exec.Command(goBin, "build", "-o", path, Package)
	if _, file, _, ok := runtime.Caller(0); ok {
		cmd.Dir = filepath.Dir(file) // inside the module, whatever the test's directory
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("go build %s: %w\n%s", Package, err, out)
	}
	return dir, path, nil
}
