package process_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/pooltest"
	"github.com/tollgate/tollgate/pool/process"
)

// waitSpare waits up to pooltest.Wait for r to have an idle spare
// supervisor other than not, and returns its pid.
func waitSpare(t *testing.T, r *process.Runner, not int) int {
	t.Helper()
	for deadline := time.Now().Add(pooltest.Wait); ; time.Sleep(10 * time.Millisecond) {
		if pid := process.SparePID(r); pid != 0 && pid != not {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new idle spare supervisor (other than %d) within %v", not, pooltest.Wait)
		}
	}
}

// startOnSpare starts an instance of r through a warm spare supervisor,
// kept for the test's life.
func startOnSpare(t *testing.T, r *process.Runner) pool.Instance {
	t.Helper()
	t.Cleanup(func() { _ = r.Close() })
	r.Warm(t.Context(), "warm")
	spare := waitSpare(t, r, 0)
	inst, err := r.Start(t.Context(), pooltest.Spec())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = inst.Stop(time.Second) })
	if p := ppid(inst.PID()); p != spare {
		t.Fatalf("instance started by %d, want the spare %d", p, spare)
	}
	return inst
}

// procView is what an instance's process was given: its argv, working
// directory and environment.
type procView struct {
	argv []string
	dir  string
	env  map[string]string
}

func viewProc(t *testing.T, pid int) procView {
	t.Helper()
	p := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(p + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.Readlink(p + "/cwd")
	if err != nil {
		t.Fatal(err)
	}
	environ, err := os.ReadFile(p + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	v := procView{argv: strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"), dir: dir, env: map[string]string{}}
	for kv := range strings.SplitSeq(strings.TrimSuffix(string(environ), "\x00"), "\x00") {
		k, val, _ := strings.Cut(kv, "=")
		v.env[k] = val
	}
	return v
}

func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return p
		}
	}
	return ""
}

// TestSpareStartsLikeFresh: an instance handed to the runner's warm spare
// supervisor gets the argv, working directory and environment (PORT and
// the K_ variables its own) that one started through a fresh supervisor
// gets, the spare leads its process group and is its cgroup's, and a new
// spare replaces the one used.
func TestSpareStartsLikeFresh(t *testing.T) {
	for _, noCgroup := range []bool{false, true} {
		t.Run(fmt.Sprintf("noCgroup=%v", noCgroup), func(t *testing.T) {
			bin := testservice.Build(t)
			r := newRunner(t, process.Options{
				Command:    "./" + filepath.Base(bin),
				Dir:        filepath.Dir(bin),
				Args:       []string{"-latency", "0s", "an arg", "x"},
				Env:        []string{"GREETING=hello world"},
				NoCgroup:   noCgroup,
				Supervisor: supervisor(t),
			})
			t.Cleanup(func() { _ = r.Close() })
			ctx := t.Context() // lives as long as the test, as the pool's does
			if pid := process.SparePID(r); pid != 0 {
				t.Fatalf("a spare (%d) before any Start", pid)
			}
			start := func(id string) (pool.Instance, procView) {
				t.Helper()
				spec := pool.InstanceSpec{Service: "svc", Revision: "svc-1", ID: id}
				inst, err := r.Start(ctx, spec)
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				t.Cleanup(func() { _ = inst.Stop(time.Second) })
				pooltest.Ready(t, inst)
				v := viewProc(t, inst.PID())
				_, port, _ := net.SplitHostPort(inst.Addr())
				for k, want := range map[string]string{"PORT": port, "K_SERVICE": "svc", "K_REVISION": "svc-1", "K_CONFIGURATION": "svc", "GREETING": "hello world"} {
					if v.env[k] != want {
						t.Errorf("instance %s: %s=%q, want %q", id, k, v.env[k], want)
					}
				}
				if pgid, _ := syscall.Getpgid(inst.PID()); pgid != ppid(inst.PID()) {
					t.Errorf("instance %s: process group %d, want its supervisor's, %d", id, pgid, ppid(inst.PID()))
				}
				return inst, v
			}
			fresh, fv := start("fresh")
			freshSuper := ppid(fresh.PID())
			spare := waitSpare(t, r, 0)
			if spare == freshSuper {
				t.Fatalf("the spare %d is the fresh instance's supervisor", spare)
			}
			warm, wv := start("warm")
			if got := ppid(warm.PID()); got != spare {
				t.Fatalf("instance started by %d, want the idle spare %d", got, spare)
			}
			if !slices.Equal(fv.argv, wv.argv) || fv.argv[0] != "./"+filepath.Base(bin) || fv.argv[3] != "an arg" {
				t.Errorf("argv fresh %q, through the spare %q", fv.argv, wv.argv)
			}
			if fv.dir != wv.dir || fv.dir != filepath.Dir(bin) {
				t.Errorf("dir fresh %q, through the spare %q, want %q", fv.dir, wv.dir, filepath.Dir(bin))
			}
			for _, k := range []string{"PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"} {
				delete(fv.env, k)
				delete(wv.env, k)
			}
			if fmt.Sprint(fv.env) != fmt.Sprint(wv.env) {
				t.Errorf("environment fresh %v, through the spare %v", fv.env, wv.env)
			}
			if dir := r.CgroupDir(); dir != "" {
				cg := cgroupOf(t, warm.PID())
				if cgroupOf(t, spare) != cg || !strings.HasPrefix(filepath.Base(cg), "tollgate-") || cg == cgroupOf(t, fresh.PID()) {
					t.Errorf("instance in cgroup %q, its supervisor in %q, the fresh one in %q: want the spare's own tollgate-… cgroup", cg, cgroupOf(t, spare), cgroupOf(t, fresh.PID()))
				}
				if cpu, ok := warm.CPUTime(); !ok || cpu <= 0 {
					t.Errorf("CPUTime() = %v, %v: want the cgroup's", cpu, ok)
				}
			}
			// A new spare replaces the one used.
			next := waitSpare(t, r, spare)
			if next == warm.PID() || next == freshSuper {
				t.Fatalf("new spare %d is an instance's process", next)
			}
			for _, inst := range []pool.Instance{fresh, warm} {
				if err := inst.Stop(pooltest.Wait); err != nil {
					t.Fatal(err)
				}
				if err := inst.Err(); err != nil {
					t.Errorf("Err() after Stop = %v", err)
				}
			}
			waitGone(t, spare, spare, warm.PID())
			if !alive(next) {
				t.Errorf("the idle spare %d died with an instance", next)
			}
		})
	}
}

// TestSpareStopped: a runner's idle spare exits when the context of the
// Start that made it ends (the pool's, when a revision is done with) and
// on Close; its cgroup goes with it. Starts go on without one.
func TestSpareStopped(t *testing.T) {
	r := newRunner(t, process.Options{Supervisor: supervisor(t)})
	t.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inst := pooltest.Start(t, r, pooltest.Spec()) // its context ends at once: no spare
	pooltest.Ready(t, inst)
	_ = inst.Stop(pooltest.Wait)
	time.Sleep(200 * time.Millisecond)
	if pid := process.SparePID(r); pid != 0 {
		t.Fatalf("spare %d made for a Start whose context ended", pid)
	}
	inst, err := r.Start(ctx, pooltest.Spec())
	if err != nil {
		t.Fatal(err)
	}
	pooltest.Ready(t, inst)
	spare := waitSpare(t, r, 0)
	cg := ""
	if dir := r.CgroupDir(); dir != "" {
		cg = filepath.Join(dir, filepath.Base(cgroupOf(t, spare)))
	}
	cancel()
	waitGone(t, spare, spare)
	if pid := process.SparePID(r); pid != 0 {
		t.Errorf("SparePID() = %d after the context ended", pid)
	}
	for deadline := time.Now().Add(pooltest.Wait); cg != ""; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(cg); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle spare's cgroup %s is left %v after it exited", cg, pooltest.Wait)
		}
	}
	if !alive(inst.PID()) {
		t.Error("the instance died with the spare")
	}
	_ = inst.Stop(pooltest.Wait)

	// Close stops the spare and keeps the runner working, without one.
	inst2, err := r.Start(t.Context(), pooltest.Spec())
	if err != nil {
		t.Fatal(err)
	}
	pooltest.Ready(t, inst2)
	spare = waitSpare(t, r, spare)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(spare) {
		t.Errorf("the idle spare %d is alive after Close returned", spare)
	}
	_ = inst2.Stop(pooltest.Wait)
	inst3 := pooltest.Start(t, r, pooltest.Spec())
	pooltest.Ready(t, inst3)
	_ = inst3.Stop(pooltest.Wait)
	time.Sleep(200 * time.Millisecond)
	if pid := process.SparePID(r); pid != 0 {
		t.Errorf("spare %d started after Close", pid)
	}
}

// TestSpareDiedIsReplacedAtNextStart: a spare killed while idle is not
// replaced until the next Start, which starts its instance without it
// and then makes a new spare.
func TestSpareDiedIsReplacedAtNextStart(t *testing.T) {
	t.Parallel() // its own runner and instances
	log, logged := testLogger(t)
	r := newRunner(t, process.Options{Supervisor: supervisor(t), Logger: log})
	t.Cleanup(func() { _ = r.Close() })
	ctx := t.Context()
	inst, err := r.Start(ctx, pooltest.Spec())
	if err != nil {
		t.Fatal(err)
	}
	pooltest.Ready(t, inst)
	_ = inst.Stop(pooltest.Wait)
	spare := waitSpare(t, r, 0)
	if err := syscall.Kill(spare, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if pid := process.SparePID(r); pid != spare {
		t.Fatalf("SparePID() = %d a second after spare %d died, before any Start: want it left alone until the next Start", pid, spare)
	}
	inst, err = r.Start(ctx, pooltest.Spec())
	if err != nil {
		t.Fatalf("Start with a dead spare: %v", err)
	}
	pooltest.Ready(t, inst)
	if p := ppid(inst.PID()); p == spare {
		t.Fatalf("instance started by the dead spare %d", spare)
	}
	if !strings.Contains(logged.String(), "exited while idle") || !strings.Contains(logged.String(), "signal: killed") {
		t.Errorf("the dead spare's end is not logged with its exit:\n%s", logged)
	}
	_ = inst.Stop(pooltest.Wait)
	next := waitSpare(t, r, spare)
	if !alive(next) {
		t.Errorf("new spare %d is not alive", next)
	}
}

// TestFrozenSpareFallsBackToFresh: a spare that takes the instance but
// never answers (stopped here) holds Start no longer than the readiness
// timeout; it is killed and the instance starts through a fresh
// supervisor.
func TestFrozenSpareFallsBackToFresh(t *testing.T) {
	t.Parallel() // its own runner; it waits out the 10 s readiness timeout
	log, logged := testLogger(t)
	r := newRunner(t, process.Options{Supervisor: supervisor(t), Logger: log, Readiness: process.Readiness{Timeout: 10 * time.Second}})
	t.Cleanup(func() { _ = r.Close() })
	r.Warm(t.Context(), "warm")
	spare := waitSpare(t, r, 0)
	if err := syscall.Kill(spare, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(spare, syscall.SIGKILL) })
	inst, err := r.Start(t.Context(), pooltest.Spec())
	if err != nil {
		t.Fatalf("Start with a frozen spare: %v", err)
	}
	t.Cleanup(func() { _ = inst.Stop(pooltest.Wait) })
	pooltest.Ready(t, inst)
	if p := ppid(inst.PID()); p == spare {
		t.Fatalf("instance started by the frozen spare %d", spare)
	}
	if alive(spare) {
		t.Errorf("the frozen spare %d is still there after Start gave up on it", spare)
	}
	if !strings.Contains(logged.String(), "did not start the instance") {
		t.Errorf("the fallback is not logged:\n%s", logged)
	}
}

// superviseSpare runs the supervisor as a spare with its status and
// control pipes, and returns the command, the runner's ends of the pipes
// and its stdout.
func superviseSpare(t *testing.T) (cmd *exec.Cmd, status, control *os.File, stdout *bytes.Buffer) {
	t.Helper()
	sup := supervisor(t)
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	controlR, controlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout = &bytes.Buffer{}
	cmd = exec.Command(sup[0], append(sup[1:], "-pipes", "-spare")...)
	cmd.ExtraFiles = []*os.File{statusW, controlR}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	statusW.Close()
	controlR.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		statusR.Close()
		controlW.Close()
	})
	return cmd, statusR, controlW, stdout
}

func waitCmd(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(pooltest.Wait):
		t.Fatalf("supervisor still running after %v", pooltest.Wait)
	}
}

// TestIdleSpareExitsWhenControlCloses: a spare whose control pipe ends
// before a request (the runner is done with it, or tollgate is gone)
// exits at once, having started nothing.
func TestIdleSpareExitsWhenControlCloses(t *testing.T) {
	cmd, status, control, _ := superviseSpare(t)
	time.Sleep(100 * time.Millisecond) // idle, waiting
	control.Close()
	waitCmd(t, cmd)
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("idle spare exited with %v, want status 0", cmd.ProcessState)
	}
	if b, _ := io.ReadAll(status); len(b) != 0 {
		t.Errorf("idle spare said %q on its status pipe, want nothing", b)
	}
}

// TestSpareRequest: a spare starts the command its request names, with
// the request's argv, environment and directory, says its pid, and exits
// with its status; a bad request is refused on the status pipe.
func TestSpareRequest(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	t.Run("ok", func(t *testing.T) {
		cmd, status, control, stdout := superviseSpare(t)
		req, _ := json.Marshal(map[string]any{
			"path": sh,
			"argv": []string{"sh", "-c", `echo "$0|$1|$GREETING|$(pwd)"; exit 7`, "zero", "an arg"},
			"env":  []string{"GREETING=hello world", "PATH=" + os.Getenv("PATH")},
			"dir":  dir,
		})
		if _, err := control.Write(append(req, '\n')); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(status)
		if !strings.HasPrefix(string(b), "pid ") {
			t.Errorf("status %q, want the command's pid", b)
		}
		waitCmd(t, cmd)
		if code := cmd.ProcessState.ExitCode(); code != 7 {
			t.Errorf("spare exited with %v, want the command's status 7", cmd.ProcessState)
		}
		if want := "zero|an arg|hello world|" + dir + "\n"; stdout.String() != want {
			t.Errorf("command wrote %q, want %q", stdout.String(), want)
		}
	})
	for name, req := range map[string]string{
		"not JSON":   "pid 1\n",
		"no argv":    `{"path":"` + sh + `"}` + "\n",
		"too long":   `{"path":"` + strings.Repeat("x", 2<<20) + "\n",
		"no newline": `{"path":"` + sh + `","argv":["sh"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			cmd, status, control, _ := superviseSpare(t)
			go func() {
				_, _ = control.Write([]byte(req))
				if name == "no newline" {
					control.Close()
				}
			}()
			b, _ := io.ReadAll(status)
			waitCmd(t, cmd)
			if name == "no newline" {
				// The control pipe ended before a request: as idle.
				if len(b) != 0 || cmd.ProcessState.ExitCode() != 0 {
					t.Errorf("status %q, exit %v: want nothing, status 0", b, cmd.ProcessState)
				}
				return
			}
			if !strings.HasPrefix(string(b), "error ") || cmd.ProcessState.ExitCode() != 2 {
				t.Errorf("status %q, exit %v: want an error, status 2", b, cmd.ProcessState)
			}
		})
	}
}
