package process

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SupervisorCommand is the name of the hidden `tollgate` subcommand that
// runs [Supervise]; `tollgate serve` sets [Options.Supervisor] to its own
// executable followed by it.
const SupervisorCommand = "instance-supervisor"

// supervisorDeathSignal is the parent-death signal the runner gives a
// supervisor: one it can catch, so that it can kill what the instance
// started before it exits. The supervisor treats it (like any signal) as
// its parent's death only when its parent process has changed.
const supervisorDeathSignal = syscall.SIGUSR1

// supervisorKillWait bounds how long Stop waits for a supervisor it asked
// to kill before it kills the process group itself.
const supervisorKillWait = 5 * time.Second

// statusFD is the descriptor on which a supervisor tells the runner the
// command's pid ("pid N") or why it could not start it ("error …").
// controlFD is the one it reads the runner's requests on: "k" asks it to
// kill the command and everything under it now (Stop's grace period has
// passed); end of file means the runner is gone.
const (
	statusFD  = 3
	controlFD = 4
	pipesFlag = "-pipes"
	spareFlag = "-spare"
)

// maxSpareRequest bounds the request a spare supervisor reads: the
// command's path, argv, environment and directory as one JSON line. A
// runner whose request is longer starts its instances without a spare.
const maxSpareRequest = 1 << 20

// spareRequest is what a runner sends a spare supervisor on its control
// pipe, as one JSON line: the command to start, as a supervisor started
// for it gets it in its arguments, environment and working directory.
type spareRequest struct {
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
}

// Supervise is the instance supervisor, the way a container's shim or
// init process (conmon, tini) is: a runner with [Options.Supervisor]
// starts it in place of the command, in the instance's process group and
// cgroup, and it starts the command. args are
//
//	[-pipes] [--] PATH ARGV0 [ARG…]
//	-pipes -spare
//
// (the command's executable, its argv[0] and its arguments; -pipes, from
// the runner, says that descriptors 3 and 4 are its status and control
// pipes). With -spare the supervisor is a runner's warm spare, started
// before the instance it will run, the way a zygote or pre-forked worker
// is: it waits on its control pipe for one JSON line naming the command
// (path, argv, env, dir; at most 1 MiB) and then starts it as one started
// with the command in its arguments does; if the control pipe ends
// first (the runner no longer needs it, or tollgate is gone) or tollgate
// dies, it exits at once, with nothing to kill. The program
// calling it (`tollgate instance-supervisor`) exits with what it returns.
//
// The supervisor makes itself a child subreaper (prctl
// PR_SET_CHILD_SUBREAPER), so every process the command starts, at any
// depth and whatever process group or session it moves to, becomes its
// child when its own parent exits; it reaps them all. The command stays
// in the supervisor's process group (the one the runner made for the
// instance), so the runner's signals to the group (SIGTERM on Stop,
// SIGKILL after the grace period) reach the command and its group
// directly, as without a supervisor: no signal is forwarded, late or
// twice. The supervisor catches the catchable ones and does nothing else.
//
//   - When the command exits, the supervisor kills every process left
//     under it, reaps them and exits with the command's status (or dies of
//     the command's signal), so the runner sees what the command did.
//   - When the runner asks it to kill (Stop's grace period has passed),
//     it kills the command and every process under it, also those that
//     left the group, and dies of SIGKILL as the command did; the runner
//     then kills the group as ever.
//   - When tollgate dies (the parent-death signal, the end of the runner's
//     control pipe, or a parent process that changed, checked every
//     second), it kills the command and every process left under it,
//     reaps them and exits.
//
// The environment, working directory, stdout and stderr are passed to the
// command unchanged (a spare passes those of the request).
func Supervise(args []string) int {
	var status, control *os.File
	spare := false
	if len(args) > 0 && args[0] == pipesFlag {
		args = args[1:]
		status, control = openFD(statusFD, "status"), openFD(controlFD, "control")
		if len(args) > 0 && args[0] == spareFlag {
			args, spare = args[1:], true
		}
	}
	if len(args) > 0 && args[0] == "--" && !spare {
		args = args[1:]
	}
	if spare && (len(args) > 0 || control == nil) || !spare && len(args) < 2 {
		return supervisorFail(status, 2, errors.New("usage: tollgate "+SupervisorCommand+" [-pipes] -- PATH ARGV0 [ARG...] | -pipes -spare"))
	}
	ppid := os.Getppid()
	// Catch (not ignore: an ignored signal stays ignored across exec) what
	// is sent to the group, and SIGCHLD to reap.
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
		syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return supervisorFail(status, 127, fmt.Errorf("becoming a child subreaper: %w", err))
	}
	// The command's parent-death signal (SIGKILL, should the supervisor
	// itself be killed) is tied to the forking thread: keep this one.
	runtime.LockOSThread()
	var ctl *bufio.Reader
	if control != nil {
		ctl = bufio.NewReader(control)
	}
	var req spareRequest
	if !spare {
		req = spareRequest{Path: args[0], Argv: args[1:], Env: os.Environ()}
	} else {
		var (
			ok  bool
			err error
		)
		if req, ok, err = awaitRequest(ctl, sigs, ppid); err != nil {
			return supervisorFail(status, 2, err)
		} else if !ok {
			return 0 // tollgate is gone, or needs no spare any more
		}
	}
	pid, err := syscall.ForkExec(req.Path, req.Argv, &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return supervisorFail(status, 127, fmt.Errorf("starting %s: %w", req.Path, err))
	}
	if status != nil {
		_, _ = fmt.Fprintf(status, "pid %d\n", pid)
		_ = status.Close()
	}
	// Requests from the runner: "k" is kill, the end is its death.
	requests := make(chan bool, 1) // true: kill; false: the runner is gone
	if control != nil {
		go func() {
			for {
				b, err := ctl.ReadByte()
				if err != nil {
					requests <- false
					return
				}
				if b == 'k' {
					requests <- true
					return
				}
			}
		}()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var (
		exited bool
		ws     syscall.WaitStatus
	)
	for {
		orphaned, kill := false, false
		select {
		case kill = <-requests:
			orphaned = !kill
		case sig := <-sigs:
			// SIGTERM and the like reached the command too (it is in
			// the supervisor's group); only the parent's death is ours.
			orphaned = sig != syscall.SIGCHLD && os.Getppid() != ppid
		case <-tick.C:
			orphaned = os.Getppid() != ppid
		}
		if w, ok := reap(pid); ok {
			exited, ws = true, w
		}
		switch {
		case kill:
			if w, ok := killDescendants(pid); ok && !exited {
				exited, ws = true, w
			}
			if !exited { // cannot be: every child is reaped
				return 128 + int(syscall.SIGKILL)
			}
			return exitLike(ws)
		case orphaned:
			killDescendants(pid)
			return 128 + int(syscall.SIGKILL)
		case exited:
			killDescendants(pid)
			return exitLike(ws)
		}
	}
}

// awaitRequest waits, as a spare, for the runner's request. It returns
// false when the control pipe ends first; when tollgate dies first, the
// spare exits at once (it has started nothing). The request is read on
// the calling goroutine, which is locked to the thread that forks: a
// request wakes that thread alone, with no handoff between threads.
func awaitRequest(ctl *bufio.Reader, sigs chan os.Signal, ppid int) (spareRequest, bool, error) {
	var (
		mu   sync.Mutex
		idle = true
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var sig os.Signal
			select {
			case <-stop:
				return
			case sig = <-sigs:
			case <-tick.C:
			}
			if sig == syscall.SIGCHLD || os.Getppid() == ppid {
				continue
			}
			mu.Lock()
			if idle {
				os.Exit(0) // tollgate is gone before the request
			}
			mu.Unlock()
			if sig != nil {
				select {
				case sigs <- sig: // the supervisor's own loop sees it
				default:
				}
			}
			return
		}
	}()
	req, err := readSpareRequest(ctl)
	mu.Lock()
	idle = false
	mu.Unlock()
	close(stop)
	<-stopped
	if errors.Is(err, io.EOF) {
		return spareRequest{}, false, nil
	}
	return req, err == nil, err
}

// readSpareRequest reads one request line of at most maxSpareRequest
// bytes. It returns io.EOF when the input ends before the line does.
func readSpareRequest(r *bufio.Reader) (spareRequest, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxSpareRequest {
			return spareRequest{}, fmt.Errorf("spare request longer than %d bytes", maxSpareRequest)
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return spareRequest{}, err
		}
	}
	var req spareRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return spareRequest{}, fmt.Errorf("spare request: %w", err)
	}
	if req.Path == "" || len(req.Argv) == 0 {
		return spareRequest{}, errors.New("spare request: no path or argv")
	}
	return req, nil
}

// openFD returns the pipe the runner passed as fd, or nil.
func openFD(fd int, name string) *os.File {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return nil
	}
	syscall.CloseOnExec(fd) // not for the command
	return os.NewFile(uintptr(fd), name)
}

func supervisorFail(status *os.File, code int, err error) int {
	fmt.Fprintf(os.Stderr, "tollgate %s: %v\n", SupervisorCommand, err)
	if status != nil {
		_, _ = fmt.Fprintf(status, "error %v\n", err)
		_ = status.Close()
	}
	return code
}

// reap reaps every child that has exited and reports the status of
// command pid if it was among them.
func reap(pid int) (syscall.WaitStatus, bool) {
	var (
		got   syscall.WaitStatus
		found bool
	)
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || p <= 0 {
			return got, found
		}
		if p == pid {
			got, found = ws, true
		}
	}
}

// killDescendants SIGKILLs the supervisor's children until it has none,
// and returns the status of command pid if it reaped it. As a subreaper
// the supervisor inherits every orphan below it, so each round kills one
// more generation. Only this goroutine reaps, so a pid it signals is its
// unreaped child and cannot have been reused.
func killDescendants(pid int) (syscall.WaitStatus, bool) {
	var (
		got   syscall.WaitStatus
		found bool
	)
	for {
		for _, k := range children(os.Getpid()) {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		if ws, ok := reap(pid); ok {
			got, found = ws, true
		}
		var info unix.Siginfo // a child left? (without reaping it)
		if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err == unix.ECHILD {
			return got, found
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := strconv.Itoa(pid)
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		var b [512]byte
		n, _ := io.ReadFull(f, b[:])
		_ = f.Close()
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := b[:n]
		i := bytes.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(s[i+1:]))
		if len(fields) >= 2 && fields[1] == want {
			out = append(out, p)
		}
	}
	return out
}

// exitLike returns the command's exit status or, when a signal ended it,
// dies of the same signal, so the runner sees what the command did.
func exitLike(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		sig := ws.Signal()
		signal.Reset(sig)
		// Reset gives back the action the supervisor started with, which
		// for a signal ignored then (SIGHUP under nohup) is to ignore it:
		// set the kernel's default action itself.
		_ = setDefaultAction(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		// The signal kills on its way to a thread; on a loaded machine
		// that may take a while. Should it not, exit as a shell would.
		for range 50 {
			time.Sleep(100 * time.Millisecond)
		}
		return 128 + int(sig)
	}
	return 1
}

// setDefaultAction sets sig's action to SIG_DFL with rt_sigaction(2),
// under the Go runtime, which offers no way to do it for a signal that
// was ignored when the process started. The kernel's struct sigaction is
// all zero for SIG_DFL without flags and with an empty mask, whichever
// fields the architecture has.
func setDefaultAction(sig syscall.Signal) error {
	var act [4]uint64
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
