package process

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// spareWriteWait bounds how long handing an instance to a spare may
// block on its control pipe (it does not, below the pipe's 64 KiB).
const spareWriteWait = 10 * time.Second

// errNoSpare says a spare could not take the instance: Start goes on
// without it, as without a spare.
var errNoSpare = errors.New("no usable spare supervisor")

// spare is a supervisor started before the instance it will run, idle on
// its control pipe (see [Supervise], -spare): its exec and the runtime's
// start are paid before Start. It has its own process group and its own
// output, status and control pipes, which become the instance's.
type spare struct {
	cmd     *exec.Cmd
	pid     int
	cancel  context.CancelFunc // cancels cmd's context: Cmd.Cancel sends SIGTERM to the instance, or SIGKILL to an idle spare
	inst    atomic.Pointer[instance]
	outR    *os.File
	errR    *os.File
	statusR *os.File
	control *os.File
	cpu     *cpuMeter   // its cgroup, which becomes the instance's
	unbind  func() bool // stops the context.AfterFunc that drops it; set under spares.mu
}

// spares is a runner's slot for one idle spare. idle, starting and closed
// are guarded by mu.
type spares struct {
	mu        sync.Mutex
	idle      *spare
	starting  bool           // a spare is being started
	closed    bool           // Close was called
	wg        sync.WaitGroup // goroutines that start or stop spares
	warnStart sync.Once
	warnCgrp  sync.Once
}

// Close stops the runner's idle spare supervisor, if it has one, and
// makes later starts go without one; it returns once the spare has
// exited. Instances keep running. A runner whose Start contexts end (the
// pool's, when a revision is retired or the pool stops) needs no Close:
// its spare is stopped with the context of the Start that made it.
// Close is safe to call more than once.
func (r *Runner) Close() error {
	r.spares.mu.Lock()
	r.spares.closed = true
	sp := r.spares.idle
	r.spares.idle = nil
	r.spares.mu.Unlock()
	if sp != nil {
		sp.unbind()
		sp.stop()
	}
	r.spares.wg.Wait()
	return nil
}

// Warm starts an idle spare supervisor for instances of service in the
// background, when the runner has a supervisor and no spare yet, so that
// its first Start is as quick as later ones; the spare is stopped when
// ctx ends or the runner is closed. It implements [runner.Warmer].
func (r *Runner) Warm(ctx context.Context, service string) {
	if r.super != "" {
		r.refillSpare(ctx, service)
	}
}

// spareRequest returns the request that hands an instance with env to a
// spare, and false when it is too long for one or when a string is not
// UTF-8 (JSON would replace its bytes).
func (r *Runner) spareRequest(env []string) ([]byte, bool) {
	if !utf8.ValidString(r.path) || !utf8.ValidString(r.opts.Dir) || !utf8.ValidString(r.opts.Command) {
		return nil, false
	}
	for _, s := range slices.Concat(r.opts.Args, env) {
		if !utf8.ValidString(s) {
			return nil, false
		}
	}
	msg, err := json.Marshal(spareRequest{
		Path: r.path,
		Argv: append([]string{r.opts.Command}, r.opts.Args...),
		Env:  env,
		Dir:  r.opts.Dir,
	})
	if err != nil || len(msg)+1 > maxSpareRequest {
		return nil, false
	}
	return append(msg, '\n'), true
}

// takeSpare returns the idle spare, if there is one and it is alive.
func (r *Runner) takeSpare() *spare {
	r.spares.mu.Lock()
	sp := r.spares.idle
	r.spares.idle = nil
	r.spares.mu.Unlock()
	if sp == nil {
		return nil
	}
	sp.unbind()
	if sp.exited() {
		r.dead(sp)
		return nil
	}
	return sp
}

// dead reaps a spare that exited while idle and says so, with what it
// wrote to stderr.
func (r *Runner) dead(sp *spare) {
	said, _ := io.ReadAll(io.LimitReader(sp.errR, 4096)) // it has exited: its end is closed
	sp.stop()                                            // reaps it at once
	r.log.Warn("the spare instance supervisor exited while idle; starting the instance without it",
		"pid", sp.pid, "exit", sp.cmd.ProcessState.String(), "stderr", strings.TrimSpace(string(said)))
}

// refillSpare starts the next spare for instances of service in the
// background, unless there is one or one is being started. The spare is
// stopped when ctx ends or the runner is closed.
func (r *Runner) refillSpare(ctx context.Context, service string) {
	s := &r.spares
	s.mu.Lock()
	if s.closed || s.idle != nil || s.starting || ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	s.starting = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		sp, err := r.newSpare(service)
		s.mu.Lock()
		s.starting = false
		if err == nil && !s.closed && ctx.Err() == nil {
			s.idle = sp
			sp.unbind = context.AfterFunc(ctx, func() { r.dropSpare(sp) })
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if err != nil {
			s.warnStart.Do(func() {
				r.log.Warn("cannot start a spare instance supervisor; instances start without one", "err", err)
			})
			return
		}
		sp.stop()
	}()
}

// dropSpare stops sp if it is still the idle spare (its context ended).
func (r *Runner) dropSpare(sp *spare) {
	s := &r.spares
	s.mu.Lock()
	if s.idle != sp || s.closed {
		s.mu.Unlock()
		return
	}
	s.idle = nil
	s.wg.Add(1) // not closed yet: before Close's Wait
	s.mu.Unlock()
	defer s.wg.Done()
	sp.stop()
}

// newSpare starts a spare supervisor, with pipes of its own, in a process
// group and a cgroup of its own, from the forking thread, as a supervisor
// for an instance is started; the cgroup is made for an instance of
// service and becomes that instance's, so the command is counted there
// from its first instruction, as is the supervisor (as a fresh one is).
// Moving the spare into a cgroup made at Start would cost a cgroup
// migration (an RCU grace period: milliseconds) on every start.
func (r *Runner) newSpare(service string) (*spare, error) {
	var files [8]*os.File // outR, outW, errR, errW, statusR, statusW, controlR, controlW
	for n := 0; n < len(files); n += 2 {
		var err error
		if files[n], files[n+1], err = os.Pipe(); err != nil {
			closeAll(files[:n]...)
			return nil, err
		}
	}
	outR, outW, errR, errW := files[0], files[1], files[2], files[3]
	statusR, statusW, controlR, controlW := files[4], files[5], files[6], files[7]
	ctx, cancel := context.WithCancel(context.Background())
	sp := &spare{cancel: cancel, outR: outR, errR: errR, statusR: statusR, control: controlW}
	sp.cpu = r.newCPUMeter(service, "spare", r.log)
	newCmd := func() *exec.Cmd {
		sup := r.opts.Supervisor
		cmd := exec.CommandContext(ctx, r.super, append(append([]string(nil), sup[1:]...), pipesFlag, spareFlag)...)
		cmd.Args[0] = sup[0]
		cmd.Dir = r.opts.Dir
		cmd.Env = append([]string(nil), r.env...)
		cmd.ExtraFiles = []*os.File{statusW, controlR} // statusFD, controlFD
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Setpgid:   true,                  // the instance's group, as a fresh supervisor's
			Pdeathsig: supervisorDeathSignal, // dies with tollgate; see startOnLockedThread
		}
		if fd := sp.cpu.cgroupFD(); fd >= 0 {
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		}
		cmd.Cancel = func() error {
			if i := sp.inst.Load(); i != nil {
				return i.signalGroup(syscall.SIGTERM)
			}
			return cmd.Process.Kill() // an idle spare: nothing of an instance to stop
		}
		cmd.WaitDelay = r.opts.StopGrace
		cmd.Stdout, cmd.Stderr = outW, errW
		return cmd
	}
	cmd := newCmd()
	err := startOnLockedThread(cmd, sp.cpu.v1, r.log)
	if err != nil && sp.cpu.cgroupFD() >= 0 {
		// A kernel or sandbox without clone3 into a cgroup: go without,
		// as a fresh supervisor does.
		r.spares.warnCgrp.Do(func() {
			r.log.Warn("starting a spare instance supervisor in its own cgroup failed; its instances' CPU time is measured from /proc", "cgroup", sp.cpu.cgroupDir, "err", err)
		})
		sp.cpu.dropCgroup()
		cmd = newCmd()
		err = startOnLockedThread(cmd, sp.cpu.v1, r.log)
	}
	closeAll(outW, errW, statusW, controlR) // the spare holds its own copies
	if err != nil {
		cancel()
		sp.cpu.close()
		closeAll(outR, errR, statusR, controlW)
		return nil, err
	}
	sp.cmd, sp.pid = cmd, cmd.Process.Pid
	return sp, nil
}

// exited reports whether the spare has exited (it is left unreaped).
func (sp *spare) exited() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, sp.pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != nil || info.Signo != 0
}

// stop ends an idle spare: the end of its control pipe tells it to exit;
// it is killed if it has not within supervisorKillWait. It returns once
// the spare has been reaped.
func (sp *spare) stop() {
	_ = sp.control.Close()
	done := make(chan struct{})
	go func() {
		_ = sp.cmd.Wait()
		close(done)
	}()
	t := time.NewTimer(supervisorKillWait)
	select {
	case <-done:
	case <-t.C:
		_ = sp.cmd.Process.Kill() // os.Process knows whether it was reaped
		<-done
	}
	t.Stop()
	sp.cancel()
	sp.cpu.close()
	closeAll(sp.outR, sp.errR, sp.statusR)
}
