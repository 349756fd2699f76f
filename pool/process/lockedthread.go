package process

import (
	"log/slog"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Linux sends an instance its parent-death signal (Pdeathsig) when the
// OS thread that forked it exits, not when tollgate exits
// (prctl(2) PR_SET_PDEATHSIG; https://go.dev/issue/27505). The Go runtime
// ends a thread when a goroutine locked to it returns without unlocking,
// which any library may do; an instance forked from such a thread would
// be killed at a random moment. So every instance is forked from one
// goroutine that locks its thread and never returns: that thread lives
// as long as tollgate does.
var forker struct {
	once sync.Once
	reqs chan *forkRequest
}

type forkRequest struct {
	cmd *exec.Cmd
	v1  *v1Group // cgroup v1 limits to fork in, or nil
	log *slog.Logger
	err chan error
}

// startOnLockedThread runs cmd.Start on the forking thread. With v1, the
// thread joins those cgroups for the fork, so the process is born in
// them (see v1Limits), and then goes back to tollgate's own.
func startOnLockedThread(cmd *exec.Cmd, v1 *v1Group, log *slog.Logger) error {
	forker.once.Do(func() {
		forker.reqs = make(chan *forkRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread never exits
			tid := unix.Gettid()
			for req := range forker.reqs {
				req.err <- forkIn(tid, req)
			}
		}()
	})
	req := &forkRequest{cmd: cmd, v1: v1, log: log, err: make(chan error, 1)}
	forker.reqs <- req
	return <-req.err
}

// forkIn starts req's command from thread tid, in req's v1 cgroups.
func forkIn(tid int, req *forkRequest) error {
	if req.v1 == nil {
		return req.cmd.Start()
	}
	v1Away.Lock() // this thread may be the main thread: see v1Away
	defer v1Away.Unlock()
	if err := req.v1.join(tid); err != nil {
		req.log.Warn("cannot start the instance in its cgroup v1; it runs unlimited", "cgroup", req.v1.name, "err", err)
		_ = req.v1.leave(tid) // a part of the cgroups may have taken it
		return req.cmd.Start()
	}
	err := req.cmd.Start()
	if lerr := req.v1.leave(tid); lerr != nil {
		// Later forks would be born in this instance's cgroups.
		req.log.Error("the forking thread cannot leave an instance's cgroup v1", "cgroup", req.v1.name, "err", lerr)
	}
	return err
}
