package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tollgate/tollgate/pool/runner"
)

// instance is one process started by a Runner.
type instance struct {
	r       *Runner
	spec    runner.InstanceSpec
	addr    string
	port    int
	log     *slog.Logger
	cmd     *exec.Cmd
	pid     int // the process the runner started: the group's leader (the supervisor, if any)
	mainPID int // the command's process: pid, or the supervisor's child
	started time.Time
	cancel  context.CancelFunc // cancels cmd's context: Cmd.Cancel sends SIGTERM
	control *os.File           // the supervisor's control pipe (controlFD), or nil
	cpu     *cpuMeter

	exited chan struct{} // closed once the process has exited (not yet reaped)
	done   chan struct{} // closed once it is reaped and its group is gone
	ready  chan struct{} // closed once the readiness check has passed or failed

	mu       sync.Mutex
	isExited bool  // exited is closed; the pid stays unreaped until cmd.Wait
	stopping bool  // Stop was called before the process exited
	err      error // why it exited; set before done is closed
	readyErr error // set before ready is closed
}

var _ runner.Instance = (*instance)(nil)

func (r *Runner) start(ctx context.Context, spec runner.InstanceSpec, port int) (*instance, error) {
	i := &instance{
		r:      r,
		spec:   spec,
		port:   port,
		addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		log:    r.log.With("service", spec.Service, "revision", spec.Revision, "instance", spec.ID),
		exited: make(chan struct{}),
		done:   make(chan struct{}),
		ready:  make(chan struct{}),
	}
	env := append(append([]string(nil), r.env...),
		"PORT="+strconv.Itoa(port),
		"K_SERVICE="+spec.Service,
		"K_REVISION="+spec.Revision,
		"K_CONFIGURATION="+spec.Service,
	)
	var p pipes
	err := errNoSpare
	fromSpare := false
	if r.super != "" {
		if req, ok := r.spareRequest(env); ok {
			if sp := r.takeSpare(); sp != nil {
				p, err = r.startOnSpare(i, sp, req)
				fromSpare = err == nil
			}
		}
	}
	if errors.Is(err, errNoSpare) {
		i.cpu = r.newCPUMeter(spec.Service, spec.ID, i.log)
		p, err = r.startFresh(i, env)
	}
	if err == nil {
		err = i.started1(p)
		if fromSpare && (errors.Is(err, errSupervisorGone) || errors.Is(err, os.ErrDeadlineExceeded)) {
			// The spare died, or hung, after it was handed the
			// instance, which started1 has killed: start it fresh.
			i.log.Warn("the spare instance supervisor did not start the instance; starting it without one", "err", err)
			i.cpu = r.newCPUMeter(spec.Service, spec.ID, i.log)
			if p, err = r.startFresh(i, env); err == nil {
				err = i.started1(p)
			}
		}
	}
	switch {
	case r.super == "":
	case err != nil:
		r.refillSpare(ctx, spec.Service)
	default:
		// The next spare starts once this instance is ready (or failed),
		// so that its start does not slow this one's.
		go func() {
			select {
			case <-i.ready:
				r.refillSpare(ctx, spec.Service)
			case <-ctx.Done():
			}
		}()
	}
	if err != nil {
		return nil, err
	}
	return i, nil
}

// pipes are the runner's ends of a started supervisor's or command's
// pipes; status is nil without a supervisor.
type pipes struct {
	out, err, status *os.File
}

// startFresh starts the command, or a supervisor for it, and sets i's
// cmd, control and cancel.
func (r *Runner) startFresh(i *instance, env []string) (pipes, error) {
	ctx, cancel := context.WithCancel(context.Background())
	i.cancel = cancel
	// Output goes through pipes of our own, not exec's copying
	// goroutines, so Wait returns when the process exits even if a
	// process it left behind holds the pipes open.
	outR, outW, err := os.Pipe()
	if err != nil {
		cancel()
		i.cpu.close()
		return pipes{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		cancel()
		i.cpu.close()
		closeAll(outR, outW)
		return pipes{}, err
	}
	// A supervisor tells the command's pid (or why it could not start
	// it) on a pipe of its own.
	// The runner asks it to kill on another, whose end tells it that
	// tollgate is gone.
	var statusR, statusW, controlR *os.File
	if r.super != "" {
		if statusR, statusW, err = os.Pipe(); err != nil {
			cancel()
			i.cpu.close()
			closeAll(outR, outW, errR, errW)
			return pipes{}, err
		}
		if controlR, i.control, err = os.Pipe(); err != nil {
			cancel()
			i.cpu.close()
			closeAll(outR, outW, errR, errW, statusR, statusW)
			return pipes{}, err
		}
	}
	cpu := i.cpu
	newCmd := func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, r.path, r.opts.Args...)
		cmd.Args[0] = r.opts.Command
		deathSig := syscall.SIGKILL
		if r.super != "" {
			sup := r.opts.Supervisor
			args := append(append(append([]string(nil), sup[1:]...), pipesFlag, "--", r.path, r.opts.Command), r.opts.Args...)
			cmd = exec.CommandContext(ctx, r.super, args...)
			cmd.Args[0] = sup[0]
			cmd.ExtraFiles = []*os.File{statusW, controlR} // statusFD, controlFD
			deathSig = supervisorDeathSignal
		}
		cmd.Dir = r.opts.Dir
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Setpgid:   true,     // its own process group, signalled as a whole
			Pdeathsig: deathSig, // dies with tollgate; see startOnLockedThread
		}
		if fd := cpu.cgroupFD(); fd >= 0 {
			// Born in its cgroup (clone3 CLONE_INTO_CGROUP): all it
			// starts is counted, from the first instruction.
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		}
		// Cancel (on Stop) sends SIGTERM to the whole group; WaitDelay
		// bounds how long exec waits after that before it kills the
		// process itself, a backstop behind Stop's own SIGKILL of the group.
		cmd.Cancel = func() error { return i.signalGroup(syscall.SIGTERM) }
		cmd.WaitDelay = r.opts.StopGrace
		cmd.Stdout, cmd.Stderr = outW, errW
		return cmd
	}
	cmd := newCmd()
	err = startOnLockedThread(cmd, cpu.v1, i.log)
	if err != nil && cpu.cgroupFD() >= 0 {
		// A kernel or sandbox without clone3 into a cgroup: go without.
		i.log.Warn("starting the instance in its own cgroup failed; measuring its CPU time from /proc", "cgroup", cpu.cgroupDir, "err", err)
		cpu.dropCgroup()
		cmd = newCmd()
		err = startOnLockedThread(cmd, cpu.v1, i.log)
	}
	i.cmd = cmd
	closeAll(outW, errW) // the child holds its own copies
	if statusW != nil {
		closeAll(statusW, controlR)
	}
	if err != nil {
		cancel()
		cpu.close()
		closeAll(outR, errR)
		if statusR != nil {
			closeAll(statusR, i.control)
		}
		return pipes{}, err
	}
	i.pid = cmd.Process.Pid
	i.started = time.Now()
	return pipes{outR, errR, statusR}, nil
}

// startOnSpare hands the instance to spare sp, whose cgroup (if any)
// becomes the instance's. It returns errNoSpare, having stopped sp, when
// sp cannot take the instance: Start then goes on without it.
func (r *Runner) startOnSpare(i *instance, sp *spare, req []byte) (pipes, error) {
	i.started = time.Now()
	_ = sp.control.SetWriteDeadline(i.started.Add(spareWriteWait))
	_, err := sp.control.Write(req)
	_ = sp.control.SetWriteDeadline(time.Time{})
	if err != nil {
		// It died since it was checked, or hangs: it started nothing.
		r.log.Warn("cannot hand the instance to the spare instance supervisor; starting it without one", "pid", sp.pid, "err", err)
		_ = syscall.Kill(-sp.pid, syscall.SIGKILL) // unreaped: the group is still its
		sp.stop()
		return pipes{}, errNoSpare
	}
	sp.inst.Store(i)
	sp.cpu.log = i.log
	i.cmd, i.pid, i.control, i.cancel, i.cpu = sp.cmd, sp.pid, sp.control, sp.cancel, sp.cpu
	return pipes{sp.outR, sp.errR, sp.statusR}, nil
}

// started1 finishes a start: it reads the supervisor's status, if any,
// and starts watching the process, its output and its readiness.
func (i *instance) started1(p pipes) error {
	i.mainPID = i.pid
	i.cpu.started(i.pid)
	if p.status != nil {
		var err error
		// It answers as soon as it has forked the command: a frozen
		// supervisor must not hold Start for ever. The wait is its own,
		// not the readiness timeout: a fork on a loaded machine can take
		// longer than a short readiness timeout, which is the command's
		// budget to listen, counted by the readiness check.
		_ = p.status.SetReadDeadline(time.Now().Add(supervisorStatusWait))
		i.mainPID, err = readStatus(p.status)
		closeAll(p.status)
		if err != nil {
			// The supervisor started nothing, or what it started is
			// killed with its group: leave nothing running.
			_ = syscall.Kill(-i.pid, syscall.SIGKILL)
			i.cpu.killCgroup()
			_ = i.cmd.Wait()
			i.cancel()
			i.cpu.close()
			closeAll(p.out, p.err, i.control)
			return err
		}
		i.log = i.log.With("supervisor", i.pid)
	}
	i.log.Info("instance started", "pid", i.mainPID, "addr", i.addr, "command", i.r.path)

	var output sync.WaitGroup
	output.Add(2)
	lim := newOutputLimit(i.log)
	go func() { defer output.Done(); logLines(p.out, i.log, "stdout", lim) }()
	go func() { defer output.Done(); logLines(p.err, i.log, "stderr", lim) }()
	go i.wait(&output, p.out, p.err)
	go i.probe()
	return nil
}

// supervisorStatusWait bounds how long Start waits for a supervisor to
// say it started the command (or why not). It forks and writes one line,
// so this is a backstop against a frozen supervisor, wide enough for a
// machine under heavy load.
const supervisorStatusWait = 60 * time.Second

// errSupervisorGone says a supervisor exited without saying a word.
var errSupervisorGone = errors.New("the instance supervisor exited before starting the command")

// readStatus reads what a supervisor says on its status pipe: the
// command's pid, or why it could not start it.
func readStatus(f *os.File) (int, error) {
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, fmt.Errorf("the instance supervisor did not say within %v whether it started the command (a frozen supervisor or an overloaded machine): %w", supervisorStatusWait, err)
	}
	if err != nil {
		return 0, fmt.Errorf("reading the supervisor's status: %w", err)
	}
	line := strings.TrimSpace(string(b))
	if rest, ok := strings.CutPrefix(line, "pid "); ok {
		if pid, err := strconv.Atoi(rest); err == nil && pid > 0 {
			return pid, nil
		}
	}
	if rest, ok := strings.CutPrefix(line, "error "); ok {
		return 0, fmt.Errorf("instance supervisor: %s", rest)
	}
	if line == "" {
		return 0, errSupervisorGone
	}
	return 0, fmt.Errorf("the instance supervisor said %q", line)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// wait watches the process until it is gone: it notes the exit before the
// pid is reaped (so no signal can reach a reused pid or group), kills
// what is left of the group, reaps, and closes done.
func (i *instance) wait(output *sync.WaitGroup, pipes ...*os.File) {
	waitExited(i.pid)
	i.mu.Lock()
	i.isExited = true
	close(i.exited)
	i.mu.Unlock()
	// The main process is gone but still unreaped, so its pid and with it
	// the group id cannot be reused yet: kill what is left of the group.
	_ = syscall.Kill(-i.pid, syscall.SIGKILL)
	i.cpu.killCgroup()
	werr := i.cmd.Wait()
	i.cancel()
	if i.control != nil {
		_ = i.control.Close()
	}
	i.cpu.exited(i.cmd.ProcessState)

	// Let the last lines through; a process that escaped the group (and
	// any cgroup) may hold the pipes, so bound the wait.
	flushed := make(chan struct{})
	go func() { output.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(time.Second):
		closeAll(pipes...)
		<-flushed
	}
	closeAll(pipes...)

	i.mu.Lock()
	if !i.stopping {
		if werr == nil {
			werr = errors.New("exit status 0")
		}
		if i.cpu.oomKilled() {
			werr = wrapOOM(werr)
		}
		i.err = fmt.Errorf("%w: %s of %s (pid %d): %w", ErrExited, i.spec.ID, i.spec.Service, i.mainPID, werr)
	}
	err := i.err
	i.mu.Unlock()
	// The cgroup is removed before done closes: Stop returns on done, and
	// a tollgate that exits once its instances are stopped would leave
	// the cgroup behind (seen as empty "…-spare-…" cgroups after a clean
	// exit, which the next tollgate took for those of one that died).
	i.cpu.close()
	i.r.releasePort(i.port)
	if err != nil {
		i.log.Debug("process exited", "pid", i.mainPID, "err", werr)
	} else {
		i.log.Debug("process stopped", "pid", i.mainPID, "exit", i.cmd.ProcessState.String())
	}
	i.mu.Lock()
	close(i.done)
	i.mu.Unlock()
}

// waitExited blocks until process pid has exited, without reaping it.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return // exited, or ECHILD: not ours to wait for any more
		}
	}
}

// signalGroup sends sig to the instance's process group unless the
// process has exited already: then its pid may be reaped and reused.
func (i *instance) signalGroup(sig syscall.Signal) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.isExited {
		return os.ErrProcessDone
	}
	if err := syscall.Kill(-i.pid, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("signalling process group %d: %w", i.pid, err)
	}
	return nil
}

// Addr returns the loopback host:port the instance was told to listen on.
func (i *instance) Addr() string { return i.addr }

// PID returns the instance's main process ID: the command's, also when a
// supervisor started it.
func (i *instance) PID() int { return i.mainPID }

// Done is closed once the process has exited and been reaped.
func (i *instance) Done() <-chan struct{} { return i.done }

// Err says why the instance exited: nil after Stop, an error wrapping
// ErrExited and the exit status otherwise.
func (i *instance) Err() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.err
}

// CPUTime returns the CPU time of the instance's processes.
func (i *instance) CPUTime() (time.Duration, bool) { return i.cpu.read() }

// Stop sends SIGTERM to the instance's process group, waits up to grace
// for the process to exit, then sends SIGKILL to the group, and returns
// once it has been reaped. grace ≤ 0 or above Options.StopGrace means
// Options.StopGrace (exec's WaitDelay backstop is set to it).
func (i *instance) Stop(grace time.Duration) error {
	if grace <= 0 || grace > i.r.opts.StopGrace {
		grace = i.r.opts.StopGrace
	}
	i.mu.Lock()
	if i.isExited {
		i.mu.Unlock()
		<-i.done
		return nil
	}
	first := !i.stopping
	i.stopping = true
	i.mu.Unlock()
	if first {
		i.log.Info("stopping instance", "pid", i.mainPID, "grace", grace)
	}
	i.cancel() // Cmd.Cancel: SIGTERM to the group
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-i.exited:
	case <-t.C:
		i.log.Warn("instance still running after the grace period; killing it", "pid", i.mainPID, "grace", grace)
		if i.control != nil {
			// The supervisor kills the command and all under it, also
			// what left the group; the group's SIGKILL follows anyway.
			if _, err := i.control.Write([]byte("k")); err == nil {
				t.Reset(supervisorKillWait)
				select {
				case <-i.exited:
				case <-t.C:
				}
			}
		}
		if err := i.signalGroup(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			i.log.Error("killing instance", "pid", i.mainPID, "err", err)
		}
		i.cpu.killCgroup()
	}
	<-i.done
	return nil
}
