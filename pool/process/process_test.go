package process_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testflags"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/pooltest"
	"github.com/tollgate/tollgate/pool/process"
)

func init() {
	if os.Getenv(parentEnv) != "" {
		// Keep the main goroutine on the main thread (the runtime holds
		// it there during init), so that the goroutine parentMain starts
		// the instance from runs on another thread, one the runtime ends
		// when that goroutine exits locked to it.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == process.SupervisorCommand {
		// This test binary is the instance supervisor, as tollgate is.
		os.Exit(process.Supervise(os.Args[2:]))
	}
	if os.Getenv(parentEnv) != "" {
		parentMain()
		return
	}
	// Every parallel test at once unless -parallel says otherwise: the
	// conformance and spare tests wait on real instances' readiness
	// timeouts and stop grace periods, not on the CPU, so GOMAXPROCS (2
	// here) left the package 42 s long, and four at a time started the
	// longest, the conformance suite, 5.6 s in (package 19.5 s).
	flag.Parse()
	testflags.ParallelDefault(32)
	testservice.Main(m)
}

// testLogger logs to t and returns what was logged, as JSON lines.
func testLogger(testing.TB) (*slog.Logger, *logtest.Buffer) {
	buf := &logtest.Buffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func newRunner(t *testing.T, opts process.Options) *process.Runner {
	t.Helper()
	if opts.Command == "" {
		opts.Command = testservice.Build(t)
	}
	if opts.Logger == nil {
		opts.Logger, _ = testLogger(t)
	}
	r, err := process.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// supervisor is the Supervisor option that runs this test binary as the
// instance supervisor (see TestMain).
func supervisor(t testing.TB) []string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self, process.SupervisorCommand}
}

func factory(noCgroup, supervised bool) pooltest.Factory {
	return func(t *testing.T, cfg pooltest.Config) pool.Runner {
		opts := process.Options{
			Env:       cfg.Env,
			Readiness: process.Readiness{Path: cfg.ReadyPath, Timeout: cfg.ReadyTimeout},
			StopGrace: cfg.StopGrace,
			NoCgroup:  noCgroup,
		}
		if supervised {
			opts.Supervisor = supervisor(t)
		}
		return newRunner(t, opts)
	}
}

// spareFactory makes supervised runners that have a warm spare
// supervisor before the first Start and keep one for the test's life
// (pooltest's contexts end with each Start, which would leave a runner
// without spares), so that the suite's starts go through spares.
func spareFactory(noCgroup bool) pooltest.Factory {
	return func(t *testing.T, cfg pooltest.Config) pool.Runner {
		r := factory(noCgroup, true)(t, cfg).(*process.Runner)
		t.Cleanup(func() { _ = r.Close() })
		r.Warm(t.Context(), "warm")
		waitSpare(t, r, 0)
		return spareRunner{r, t.Context()}
	}
}

// spareRunner starts instances of r with a context that lives as long as
// the test, as the pool's does.
type spareRunner struct {
	r   *process.Runner
	ctx context.Context
}

func (s spareRunner) Start(ctx context.Context, spec pool.InstanceSpec) (pool.Instance, error) {
	if ctx.Err() != nil {
		return s.r.Start(ctx, spec)
	}
	return s.r.Start(s.ctx, spec)
}

func TestConformance(t *testing.T) {
	t.Parallel() // each runner has its own instances and spares
	for _, v := range []struct {
		name string
		f    pooltest.Factory
	}{
		{"cgroup", factory(false, false)},
		{"proc", factory(true, false)},
		{"supervised-cgroup", factory(false, true)},
		{"supervised-proc", factory(true, true)},
		{"supervised-spare-cgroup", spareFactory(false)},
		{"supervised-spare-proc", spareFactory(true)},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			pooltest.Run(t, v.f)
		})
	}
}

func TestNewRejectsBadCommand(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		// root may execute what has any x bit: the mode check must still say no.
		t.Log("running as root")
	}
	for _, tc := range []struct{ name, command, dir string }{
		{"empty", "", ""},
		{"missing absolute", filepath.Join(dir, "missing"), ""},
		{"missing in PATH", "tollgate-no-such-command", ""},
		{"missing relative to dir", "./missing", dir},
		{"not executable", notExec, ""},
		{"not executable relative to dir", "./not-exec", dir},
		{"a directory", dir, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := process.New(process.Options{Command: tc.command, Dir: tc.dir})
			if !errors.Is(err, process.ErrCommand) {
				t.Fatalf("New(%q) = %v, want ErrCommand", tc.command, err)
			}
			var oe *process.OptionError
			if !errors.As(err, &oe) || oe.Field != "command" {
				t.Errorf("New(%q) = %v, want an OptionError for field command", tc.command, err)
			}
		})
	}
}

func TestNewResolvesRelativeToDir(t *testing.T) {
	bin := testservice.Build(t)
	log, _ := testLogger(t)
	r, err := process.New(process.Options{Command: "./" + filepath.Base(bin), Dir: filepath.Dir(bin), Logger: log})
	if err != nil {
		t.Fatalf("New(./testservice in its dir) = %v", err)
	}
	inst := pooltest.Start(t, r, pooltest.Spec())
	pooltest.Ready(t, inst)
}

func TestNewRejectsBadOptions(t *testing.T) {
	bin := testservice.Build(t)
	for _, tc := range []struct {
		field string
		opts  process.Options
	}{
		{"env[1]", process.Options{Env: []string{"A=1", "PORT=80"}}},
		{"env[0]", process.Options{Env: []string{"K_SERVICE=x"}}},
		{"env[0]", process.Options{Env: []string{"novalue"}}},
		{"dir", process.Options{Dir: filepath.Join(t.TempDir(), "missing")}},
		{"readiness.path", process.Options{Readiness: process.Readiness{Path: "healthz"}}},
		{"readiness.timeout", process.Options{Readiness: process.Readiness{Timeout: -time.Second}}},
		{"stop_grace", process.Options{StopGrace: -time.Second}},
		{"supervisor", process.Options{Supervisor: []string{filepath.Join(t.TempDir(), "missing")}}},
	} {
		tc.opts.Command = bin
		_, err := process.New(tc.opts)
		var oe *process.OptionError
		if !(errors.Is(err, process.ErrInvalid) || tc.field == "supervisor" && errors.Is(err, process.ErrCommand)) || !errors.As(err, &oe) || oe.Field != tc.field {
			t.Errorf("New(%+v) = %v, want ErrInvalid for field %s", tc.opts, err, tc.field)
		}
	}
}

// records parses the JSON log lines in buf.
func records(t *testing.T, buf *logtest.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

func TestOutputIsLoggedWithServiceAndInstance(t *testing.T) {
	log, buf := testLogger(t)
	r := newRunner(t, process.Options{Logger: log})
	spec := pool.InstanceSpec{Service: "hello", Revision: "hello-00002", ID: "inst-7"}
	inst := pooltest.Start(t, r, spec)
	pooltest.Ready(t, inst)
	pooltest.Get(t, inst, "/log?line=marker-line")
	pooltest.Get(t, inst, "/log?n="+strconv.Itoa(3*process.MaxLogLine))
	pooltest.Get(t, inst, "/log?line=after-the-long-one")
	if err := inst.Stop(pooltest.Wait); err != nil {
		t.Fatal(err)
	}
	var marker, long, after bool
	for _, rec := range records(t, buf) {
		if rec["stream"] == nil {
			continue
		}
		if rec["service"] != "hello" || rec["revision"] != "hello-00002" || rec["instance"] != "inst-7" {
			t.Errorf("output record without service, revision and instance: %v", rec)
		}
		msg, _ := rec["msg"].(string)
		switch {
		case msg == "marker-line":
			marker = rec["stream"] == "stdout"
		case strings.HasPrefix(msg, "xxxx"):
			if len(msg) > process.MaxLogLine || rec["truncated"] != true {
				t.Errorf("a %d-byte line was logged as %d bytes, truncated=%v", 3*process.MaxLogLine, len(msg), rec["truncated"])
			}
			if long {
				t.Error("the rest of a cut line was logged")
			}
			long = true
		case msg == "after-the-long-one":
			after = true
		}
	}
	if !marker || !long || !after {
		t.Errorf("logged marker=%v long=%v after=%v, want all; log:\n%s", marker, long, after, buf.String())
	}
}

func TestReadyByTCPIgnoresHealthPath(t *testing.T) {
	// Without a readiness path the TCP check passes while /healthz still
	// fails: the check really is a TCP connect.
	r := newRunner(t, process.Options{Env: []string{testservice.EnvHealthyAfter + "=1h"}})
	inst := pooltest.Start(t, r, pooltest.Spec())
	pooltest.Ready(t, inst)
	if code, _ := pooltest.Get(t, inst, "/healthz"); code != 503 {
		t.Errorf("/healthz = %d, want 503 (not yet healthy)", code)
	}
}

func TestReadyHTTPTimeoutNamesTheProbe(t *testing.T) {
	t.Parallel() // its own runner and instances
	r := newRunner(t, process.Options{
		Env:       []string{testservice.EnvHealthyAfter + "=1h"},
		Readiness: process.Readiness{Path: "/healthz", Timeout: 3 * time.Second},
	})
	inst := pooltest.Start(t, r, pooltest.Spec())
	ctx, cancel := context.WithTimeout(context.Background(), pooltest.Wait)
	defer cancel()
	err := inst.Ready(ctx)
	if !errors.Is(err, process.ErrNotReady) || !strings.Contains(err.Error(), "503") {
		t.Errorf("Ready = %v, want ErrNotReady naming the 503", err)
	}
}

func TestExitBeforeReadyIsErrExited(t *testing.T) {
	r := newRunner(t, process.Options{Env: []string{testservice.EnvExit + "=3"}})
	inst := pooltest.Start(t, r, pooltest.Spec())
	ctx, cancel := context.WithTimeout(context.Background(), pooltest.Wait)
	defer cancel()
	err := inst.Ready(ctx)
	if !errors.Is(err, process.ErrNotReady) || !errors.Is(err, process.ErrExited) {
		t.Errorf("Ready = %v, want ErrNotReady and ErrExited", err)
	}
	var ee *exec.ExitError
	if !errors.As(inst.Err(), &ee) || ee.ExitCode() != 3 {
		t.Errorf("Err() = %v, want exit status 3", inst.Err())
	}
}

func TestCrashIsErrExited(t *testing.T) {
	r := newRunner(t, process.Options{Env: []string{testservice.EnvCrashAfter + "=1"}})
	inst := pooltest.Start(t, r, pooltest.Spec())
	pooltest.Ready(t, inst)
	pooltest.Get(t, inst, "/")
	pooltest.WaitDone(t, inst)
	var ee *exec.ExitError
	if err := inst.Err(); !errors.Is(err, process.ErrExited) || !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("Err() = %v, want ErrExited with exit status 1", err)
	}
}

// pids asks the instance for its pid, pgid and child pids.
func pids(t *testing.T, inst pool.Instance) (pid, pgid int, children []int) {
	t.Helper()
	_, body := pooltest.Get(t, inst, "/pids")
	var v struct {
		PID, PGID int
		Children  []int
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/pids: %v: %q", err, body)
	}
	return v.PID, v.PGID, v.Children
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// groupMembers lists the live processes in process group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// waitGone waits up to pooltest.Wait for pids and group pgid (unless 0)
// to be gone.
func waitGone(t *testing.T, pgid int, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(pooltest.Wait)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if pgid != 0 {
			left = append(left, groupMembers(pgid)...)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v still alive %v later", left, pooltest.Wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ppid returns the parent of process pid, or 0.
func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(fields[1])
	return p
}

func TestOwnProcessGroupAndChildrenStop(t *testing.T) {
	t.Parallel() // its own runner and instances
	for _, supervised := range []bool{false, true} {
		for _, ignore := range []bool{false, true} {
			t.Run(fmt.Sprintf("supervised=%v/ignoreSIGTERM=%v", supervised, ignore), func(t *testing.T) {
				opts := process.Options{Env: []string{
					testservice.EnvSpawnChild + "=1",
					testservice.EnvIgnoreSIGTERM + "=" + strconv.FormatBool(ignore),
				}}
				if supervised {
					opts.Supervisor = supervisor(t)
				}
				inst := pooltest.Start(t, newRunner(t, opts), pooltest.Spec())
				pooltest.Ready(t, inst)
				pid, pgid, children := pids(t, inst)
				leader := pid
				if supervised {
					// The supervisor leads the group; the command is its child.
					leader = ppid(pid)
				}
				if pid != inst.PID() || pgid != leader || leader == os.Getpid() {
					t.Fatalf("instance pid %d (parent %d) in group %d, want pid %d in the group of %d", pid, ppid(pid), pgid, inst.PID(), leader)
				}
				if len(children) != 1 || !alive(children[0]) {
					t.Fatalf("children %v, want one live child", children)
				}
				if err := inst.Stop(time.Second); err != nil {
					t.Fatal(err)
				}
				waitGone(t, pgid, append(children, pid, leader)...)
			})
		}
	}
}

// TestSupervisorStopsEscapedChild: a child that left the instance's
// process group and session (a daemon) is killed on Stop by the
// supervisor, also without a cgroup to find it by, whether the instance
// exits on SIGTERM or is killed after the grace period. Without a
// supervisor it would be left running.
func TestSupervisorStopsEscapedChild(t *testing.T) {
	t.Parallel() // its own runner and instances
	for _, tc := range []struct{ ignore, spare bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		ignore := tc.ignore
		t.Run(fmt.Sprintf("ignoreSIGTERM=%v/spare=%v", ignore, tc.spare), func(t *testing.T) {
			r := newRunner(t, process.Options{
				NoCgroup:   true,
				Supervisor: supervisor(t),
				StopGrace:  pooltest.Wait,
				Env: []string{
					testservice.EnvSpawnChild + "=1", testservice.EnvChildSession + "=1",
					testservice.EnvIgnoreSIGTERM + "=" + strconv.FormatBool(ignore),
				},
			})
			var inst pool.Instance
			if tc.spare {
				inst = startOnSpare(t, r)
			} else {
				inst = pooltest.Start(t, r, pooltest.Spec())
			}
			pooltest.Ready(t, inst)
			pid, pgid, children := pids(t, inst)
			if len(children) != 1 || !alive(children[0]) {
				t.Fatalf("children %v, want one live child", children)
			}
			t.Cleanup(func() { _ = syscall.Kill(children[0], syscall.SIGKILL) })
			if g, _ := syscall.Getpgid(children[0]); g == pgid {
				t.Fatalf("child %d still in the instance's group %d", children[0], pgid)
			}
			if err := inst.Stop(time.Second); err != nil {
				t.Fatal(err)
			}
			if err := inst.Err(); err != nil {
				t.Errorf("Err() after Stop = %v", err)
			}
			waitGone(t, pgid, pid, children[0])
		})
	}
}

// The parent-death test runs this test binary as a "tollgate" that
// starts one instance and reports its pid, and then SIGKILLs it.
const (
	parentEnv           = "TOLLGATE_PROCESS_TEST_PARENT"
	parentInstanceEnv   = "TOLLGATE_PROCESS_TEST_INSTANCE_ENV" // comma-separated
	parentSupervisedEnv = "TOLLGATE_PROCESS_TEST_SUPERVISED"   // 1: with this binary as supervisor
)

// parentMain is the parent program: it starts an instance of the command
// in parentEnv, prints "pid <pid>" once it is ready and waits to be killed.
func parentMain() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var env []string
	if e := os.Getenv(parentInstanceEnv); e != "" {
		env = strings.Split(e, ",")
	}
	opts := process.Options{Command: os.Getenv(parentEnv), Env: env, Logger: log}
	if os.Getenv(parentSupervisedEnv) == "1" {
		self, err := os.Executable()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		opts.Supervisor = []string{self, process.SupervisorCommand}
	}
	r, err := process.New(opts)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	// Start from a goroutine that exits locked to its thread, so the
	// runtime ends the thread right after: the instance must not die
	// with that thread.
	var inst pool.Instance
	started := make(chan struct{})
	go func() {
		defer close(started)
		runtime.LockOSThread()
		inst, err = r.Start(context.Background(), pool.InstanceSpec{Service: "orphan", Revision: "orphan-1", ID: "o1"})
	}()
	<-started
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pooltest.Wait)
	defer cancel()
	if err := inst.Ready(ctx); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	// Churn the runtime's threads: a goroutine that exits while locked
	// to its thread ends that thread, which would fire the parent-death
	// signal had the instance been forked from it.
	for range 20 {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(done)
		}()
		<-done
	}
	child := 0
	if resp, err := http.Get("http://" + inst.Addr() + "/pids"); err == nil {
		var v struct{ Children []int }
		_ = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if len(v.Children) > 0 {
			child = v.Children[0]
		}
	}
	// A supervised runner has an idle spare supervisor once the instance
	// is ready: it must die with tollgate too.
	spare := 0
	for deadline := time.Now().Add(pooltest.Wait); opts.Supervisor != nil && spare == 0 && time.Now().Before(deadline); {
		if spare = process.SparePID(r); spare == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Printf("pid %d child %d spare %d\n", inst.PID(), child, spare)
	select {}
}

// startParent runs this test binary as a tollgate that starts one
// instance of the test service with env, and returns the instance's pid,
// its child's pid (0 without one), the runner's idle spare supervisor's
// pid (0 without a supervisor) and a function that SIGKILLs the parent.
func startParent(t *testing.T, supervised bool, env ...string) (pid, child, spare int, kill func()) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(self)
	parent.Env = append(os.Environ(), parentEnv+"="+testservice.Build(t), parentInstanceEnv+"="+strings.Join(env, ","))
	if supervised {
		parent.Env = append(parent.Env, parentSupervisedEnv+"=1")
	}
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = parent.Wait(); close(exited) }()
	kill = func() {
		_ = parent.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	cgroups := newRunner(t, process.Options{}).CgroupDir()
	t.Cleanup(func() {
		kill()
		if cgroups == "" {
			return
		}
		// Remove the dead parent's instance cgroups once empty, rather
		// than leave them to the next tollgate's sweep.
		left, _ := filepath.Glob(filepath.Join(cgroups, fmt.Sprintf("tollgate-*-%d-*", parent.Process.Pid)))
		for _, dir := range left {
			for deadline := time.Now().Add(pooltest.Wait); os.Remove(dir) != nil && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
	lines := make(chan string, 1)
	go func() {
		var b [256]byte
		n, _ := out.Read(b[:])
		lines <- string(b[:n])
	}()
	select {
	case line := <-lines:
		if _, err := fmt.Sscanf(line, "pid %d child %d spare %d", &pid, &child, &spare); err != nil {
			t.Fatalf("parent said %q", line)
		}
	case <-time.After(pooltest.Wait):
		t.Fatal("parent did not start an instance")
	}
	return pid, child, spare, kill
}

func TestInstancesDieWithTollgate(t *testing.T) {
	pid, _, _, kill := startParent(t, false)
	// Readiness has passed and the runtime has ended the thread the
	// parent called Start on: the instance must still be alive.
	time.Sleep(200 * time.Millisecond)
	if !alive(pid) {
		t.Fatalf("instance %d died while its parent lives: the parent-death signal fired on a thread exit", pid)
	}
	kill()
	waitGone(t, pid, pid)
}

// TestSupervisedInstanceTreeDiesWithTollgate: with a supervisor, when
// tollgate is killed the instance, the child it started in its process
// group, a child it started in a session of its own, the supervisor and
// the runner's idle spare supervisor are all gone, with no next tollgate
// to sweep anything.
func TestSupervisedInstanceTreeDiesWithTollgate(t *testing.T) {
	for _, session := range []bool{false, true} {
		t.Run(fmt.Sprintf("childSession=%v", session), func(t *testing.T) {
			pid, child, spare, kill := startParent(t, true,
				testservice.EnvSpawnChild+"=1", testservice.EnvChildSession+"="+strconv.FormatBool(session))
			if child == 0 {
				t.Fatal("the instance has no child")
			}
			if spare == 0 {
				t.Fatal("the runner has no idle spare supervisor")
			}
			t.Cleanup(func() { _ = syscall.Kill(spare, syscall.SIGKILL) })
			t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
			super := ppid(pid)
			// Readiness has passed and the runtime has ended the thread
			// the parent called Start on: all must still be alive.
			time.Sleep(200 * time.Millisecond)
			for _, p := range []int{super, pid, child, spare} {
				if !alive(p) {
					t.Fatalf("process %d (supervisor %d, instance %d, child %d, spare %d) died while tollgate lives", p, super, pid, child, spare)
				}
			}
			kill()
			deadline := time.Now().Add(30 * time.Second)
			for {
				var left []int
				for _, p := range []int{super, pid, child, spare} {
					if alive(p) {
						left = append(left, p)
					}
				}
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("processes %v (supervisor %d, instance %d, child %d, idle spare %d) still alive 30 s after tollgate was killed", left, super, pid, child, spare)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

func TestNextTollgateKillsLeftovers(t *testing.T) {
	if newRunner(t, process.Options{}).CgroupDir() == "" {
		t.Skip("no delegated cgroup v2 here: nothing can find what a killed tollgate's instances left")
	}
	pid, child, _, kill := startParent(t, false, testservice.EnvSpawnChild+"=1")
	if child == 0 {
		t.Fatal("the instance has no child")
	}
	kill()
	waitGone(t, 0, pid)
	// The parent-death signal reached the instance, not its child: the
	// child is left, in the instance's process group and cgroup.
	if !alive(child) {
		t.Skipf("child %d died with its parent here; nothing left to sweep", child)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	// The next tollgate to start removes what the dead one left.
	pid2, _, _, _ := startParent(t, false)
	waitGone(t, 0, child)
	if !alive(pid2) {
		t.Errorf("the new tollgate's own instance %d is gone", pid2)
	}
}

func TestCgroupPerInstance(t *testing.T) {
	r := newRunner(t, process.Options{})
	parent := r.CgroupDir()
	if parent == "" {
		t.Skip("no delegated cgroup v2 here: CPU time comes from /proc")
	}
	inst := pooltest.Start(t, r, pooltest.Spec())
	pooltest.Ready(t, inst)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", inst.PID()))
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			path = p
		}
	}
	name := filepath.Base(path)
	dir := filepath.Join(parent, name)
	if !strings.HasPrefix(name, "tollgate-") {
		t.Fatalf("instance in cgroup %q, want its own tollgate-… cgroup under %s", path, parent)
	}
	if _, err := os.Stat(filepath.Join(dir, "cpu.stat")); err != nil {
		t.Fatalf("instance cgroup %s: %v", dir, err)
	}
	if err := inst.Stop(pooltest.Wait); err != nil {
		t.Fatal(err)
	}
	// Gone when Stop returns, not later: a tollgate exits once its
	// instances are stopped, and would leave the cgroup behind.
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cgroup %s still there when Stop returned: %v", dir, err)
	}
}

// TestSupervisorMirrorsExit: the supervisor exits with its command's
// status, or dies of its command's signal, so a runner sees what the
// command did.
func TestSupervisorMirrorsExit(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	sup := supervisor(t)
	for _, tc := range []struct {
		script string
		code   int
		sig    syscall.Signal
	}{
		{"exit 0", 0, 0},
		{"exit 7", 7, 0},
		{"kill -TERM $$", -1, syscall.SIGTERM},
		{"kill -KILL $$", -1, syscall.SIGKILL},
		{"kill -HUP $$", -1, syscall.SIGHUP},
	} {
		cmd := exec.Command(sup[0], append(sup[1:], "--", sh, "sh", "-c", tc.script)...)
		err := cmd.Run()
		st := cmd.ProcessState
		if st == nil {
			t.Fatalf("%q: %v", tc.script, err)
		}
		ws := st.Sys().(syscall.WaitStatus)
		if st.ExitCode() != tc.code || tc.sig != 0 && (!ws.Signaled() || ws.Signal() != tc.sig) {
			t.Errorf("supervised %q: %v, want exit code %d signal %v", tc.script, st, tc.code, tc.sig)
		}
	}
	// A command that cannot be started is exit status 127.
	cmd := exec.Command(sup[0], append(sup[1:], "--", filepath.Join(t.TempDir(), "missing"), "missing")...)
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 127 {
		t.Errorf("supervised missing command: %v, want exit status 127", err)
	}
}

// TestSupervisedStartFailsWhenCommandGone: a command removed after New
// makes Start fail through the supervisor too, leaving nothing running.
func TestSupervisedStartFailsWhenCommandGone(t *testing.T) {
	cmd := filepath.Join(t.TempDir(), "gone")
	if err := os.WriteFile(cmd, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, process.Options{Command: cmd, Supervisor: supervisor(t)})
	if err := os.Remove(cmd); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pooltest.Wait)
	defer cancel()
	inst, err := r.Start(ctx, pooltest.Spec())
	if err == nil {
		_ = inst.Stop(time.Second)
		t.Fatal("Start of a removed command = nil error")
	}
	if !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Start = %v, want it to say the command is missing", err)
	}
}

// TestOutputIsRateLimitedPerInstance: an instance writing 200,000 lines at
// once gets about OutputBurst of them logged (plus the refill over the
// time it took), the rest dropped and counted in "instance output
// dropped" records, and a line written after the stream calmed down is
// logged again.
func TestOutputIsRateLimitedPerInstance(t *testing.T) {
	t.Parallel() // its own runner and instances
	log, buf := testLogger(t)
	r := newRunner(t, process.Options{Logger: log})
	inst := pooltest.Start(t, r, pool.InstanceSpec{Service: "loud", Revision: "loud-00001", ID: "loud-1"})
	pooltest.Ready(t, inst)
	start := time.Now()
	const lines = 200_000
	pooltest.Get(t, inst, "/log?line=spam&count="+strconv.Itoa(lines))
	time.Sleep(2 * time.Second) // the output drains; the bucket refills a little
	pooltest.Get(t, inst, "/log?line=after-the-flood")
	if err := inst.Stop(pooltest.Wait); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	var logged, dropped int64
	after := false
	for _, rec := range records(t, buf) {
		switch rec["msg"] {
		case "spam":
			logged++
		case "after-the-flood":
			after = true
		case "instance output dropped":
			n, _ := rec["lines"].(float64)
			dropped += int64(n)
		}
	}
	if most := int64(process.OutputBurst + process.OutputPerSecond*(elapsed.Seconds()+1)); logged > most {
		t.Errorf("%d of %d lines logged in %v, want at most %d", logged, lines, elapsed, most)
	}
	if logged+dropped != lines {
		t.Errorf("%d lines logged and %d counted dropped, want %d in all", logged, dropped, lines)
	}
	if !after {
		t.Error("a line written after the flood was not logged")
	}
}

// TestSlowSupervisorIsNotAReadinessTimeout: a supervisor that takes longer
// to start the command than the readiness timeout (a fork on a loaded
// machine) still starts the instance; the readiness timeout is the
// command's budget to listen, reported by Ready, not a limit on the
// supervisor's status line (which failed Start with "reading the
// supervisor's status: read |0: i/o timeout" at load 8).
func TestSlowSupervisorIsNotAReadinessTimeout(t *testing.T) {
	t.Parallel()
	sup := supervisor(t)
	// sh sleeps, then becomes the supervisor with the runner's arguments
	// (and its status and control descriptors 3 and 4).
	slow := append([]string{"/bin/sh", "-c", `sleep 1.5; exec "$0" "$@"`}, sup...)
	r := newRunner(t, process.Options{Supervisor: slow, Readiness: process.Readiness{Timeout: time.Second}})
	t.Cleanup(func() { _ = r.Close() })
	inst, err := r.Start(t.Context(), pooltest.Spec())
	if err != nil {
		t.Fatalf("Start with a supervisor slower than the readiness timeout: %v", err)
	}
	t.Cleanup(func() { _ = inst.Stop(time.Second) })
	if inst.PID() <= 0 {
		t.Errorf("PID = %d", inst.PID())
	}
	ctx, cancel := context.WithTimeout(t.Context(), pooltest.Wait)
	defer cancel()
	if err := inst.Ready(ctx); err != nil && ctx.Err() != nil {
		t.Fatalf("Ready ended by the test's context, not by readiness: %v", err)
	}
}
