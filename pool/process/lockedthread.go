package process

import (
	"os/exec"
	"runtime"
	"sync"
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
	err chan error
}

// startOnLockedThread runs cmd.Start on the forking thread.
func startOnLockedThread(cmd *exec.Cmd) error {
	forker.once.Do(func() {
		forker.reqs = make(chan *forkRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread never exits
			for req := range forker.reqs {
				req.err <- req.cmd.Start()
			}
		}()
	})
	req := &forkRequest{cmd: cmd, err: make(chan error, 1)}
	forker.reqs <- req
	return <-req.err
}
