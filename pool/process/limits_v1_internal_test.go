package process

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
)

// TestV1CgroupsStayUnderTollgates: the forking thread may be the main
// thread, whose cgroups /proc/self/cgroup shows, and it sits in an
// instance's cgroups v1 for each fork. A cgroup made for another
// instance meanwhile must still go under tollgate's own, not inside the
// first instance's, where the first one's kill (on its stop) would kill
// the second instance too. The main thread joins instance a's cgroups
// here as the forking thread does; b is made meanwhile; a's kill must
// leave b's process running.
func TestV1CgroupsStayUnderTollgates(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := newV1Limits(0.5, 0, log)
	if err != nil {
		t.Skipf("no cgroup v1 for instances on this machine: %v", err)
	}
	name := func(id string) string {
		return fmt.Sprintf("%s%d-v1test-%s-%s", cgroupPrefix(), os.Getpid(), id, randomSuffix())
	}
	a, err := l.group(name("a"))
	if err != nil {
		t.Fatal(err)
	}
	main := os.Getpid() // the main thread's id is the process's
	if err := a.join(main); err != nil {
		t.Fatalf("moving the main thread into a's cgroups: %v", err)
	}
	b, err := l.group(name("b"))
	if lerr := a.leave(main); lerr != nil {
		t.Fatalf("moving the main thread back: %v", lerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, g := range []*v1Group{b, a} { // b first: it may be inside a
			if err := g.remove(5 * time.Second); err != nil {
				t.Error(err)
			}
		}
	})
	for _, g := range []*v1Group{a, b} {
		if _, err := os.Stat(filepath.Join(l.dirs[cgroup1.Cpu], g.name)); err != nil {
			t.Errorf("cgroup %s is not under tollgate's own %s: %v", g.name, l.dirs[cgroup1.Cpu], err)
		}
	}

	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sleep.Wait(); close(exited) }()
	t.Cleanup(func() { _ = sleep.Process.Kill(); <-exited })
	if err := b.cg.Add(cgroup1.Process{Pid: sleep.Process.Pid}); err != nil {
		t.Fatalf("putting a process in b's cgroups: %v", err)
	}
	a.kill()
	select {
	case <-exited:
		t.Fatalf("killing what is in a's cgroups killed b's process too (%v)", sleep.ProcessState)
	case <-time.After(time.Second):
	}
	if err := syscall.Kill(sleep.Process.Pid, 0); err != nil {
		t.Fatalf("b's process: %v", err)
	}
}
