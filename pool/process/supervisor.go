package process

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
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
)

// Supervise is the instance supervisor, the way a container's shim or
// init process (conmon, tini) is: a runner with [Options.Supervisor]
// starts it in place of the command, in the instance's process group and
// cgroup, and it starts the command. args are
//
//	[-pipes] [--] PATH ARGV0 [ARG…]
//
// (the command's executable, its argv[0] and its arguments; -pipes, from
// the runner, says that descriptors 3 and 4 are its status and control
// pipes). The program
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
// command unchanged.
func Supervise(args []string) int {
	var status, control *os.File
	if len(args) > 0 && args[0] == pipesFlag {
		args = args[1:]
		status, control = openFD(statusFD, "status"), openFD(controlFD, "control")
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) < 2 {
		return supervisorFail(status, 2, errors.New("usage: tollgate "+SupervisorCommand+" [-pipes] -- PATH ARGV0 [ARG...]"))
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
	pid, err := syscall.ForkExec(args[0], args[1:], &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return supervisorFail(status, 127, fmt.Errorf("starting %s: %w", args[0], err))
	}
	if status != nil {
		_, _ = fmt.Fprintf(status, "pid %d\n", pid)
		_ = status.Close()
	}
	// Requests from the runner: "k" is kill, the end is its death.
	requests := make(chan bool, 1) // true: kill; false: the runner is gone
	if control != nil {
		go func() {
			var b [1]byte
			for {
				if _, err := control.Read(b[:]); err != nil {
					requests <- false
					return
				}
				if b[0] == 'k' {
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
