package process

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// Where the machine has no cgroup v2 controllers for tollgate's instances
// (a cgroup v1 or hybrid host: the controllers are bound to v1
// hierarchies), the runner enforces cpus and memory with cgroup v1's cpu
// controller (cpu.cfs_quota_us per cpu.cfs_period_us) and memory
// controller (memory.limit_in_bytes, and memory.memsw.limit_in_bytes at
// the same value where swap is accounted, so no swap), through
// github.com/containerd/cgroups' cgroup1 package, which knows the v1 file
// formats, nesting under tollgate's own cgroups and their removal.
//
// cgroup v1 has no way to start a process in a cgroup (clone3's
// CLONE_INTO_CGROUP is v2 only), and moving it there after the fork
// leaves out what it forked before the move. But v1 places threads, not
// processes, and a child is born in its forking thread's cgroups: the
// one forking thread (see startOnLockedThread) joins the instance's
// cgroups for the fork and goes back to tollgate's own right after.

// v1Limits is a runner's cgroup v1 enforcement.
type v1Limits struct {
	hier   cgroup1.Hierarchy       // the cpu and memory subsystems, those in use
	home   cgroup1.Path            // tollgate's own cgroups' paths, read once (see homePath)
	parent cgroup1.Cgroup          // tollgate's own cgroups there: the forking thread's home
	res    *specs.LinuxResources   // what each instance's cgroups get
	dirs   map[cgroup1.Name]string // tollgate's own cgroup directories
}

// pather is what cgroup1's subsystems that have directories implement.
type pather interface{ Path(string) string }

// v1Away is held while the forking thread is out of tollgate's own
// cgroups v1, in an instance's for a fork (see forkIn). The forking
// thread may be the main thread, and /proc/self/cgroup, which
// cgroup1.NestedPath reads, is the main thread's: read meanwhile, it
// names the instance's cgroups, and cgroups made from it were nested in
// that instance's, so that its kill killed theirs (seen as another
// instance's connection closing at once, "EOF", in loaded test runs).
var v1Away sync.Mutex

// homePath reads tollgate's own cgroup v1 paths while the forking thread
// is in them.
func homePath() cgroup1.Path {
	v1Away.Lock()
	defer v1Away.Unlock()
	return cgroup1.NestedPath("") // read now, not when called
}

// v1Swept holds the v1 cgroup directories this process has swept of the
// cgroups of dead tollgates, each once.
var v1Swept sync.Map

// newV1Limits finds the cgroup v1 hierarchies of the controllers that cpus
// and memory need, checks that tollgate may make cgroups in its own there,
// and returns the enforcement of them; an error says why it cannot.
func newV1Limits(cpus float64, memory int64, log *slog.Logger) (*v1Limits, error) {
	all, err := cgroup1.Default()
	if err != nil {
		return nil, fmt.Errorf("no cgroup v1 hierarchies: %w", err)
	}
	var want []cgroup1.Name
	res := &specs.LinuxResources{}
	if cpus > 0 {
		want = append(want, cgroup1.Cpu)
		quota, period := max(int64(math.Ceil(cpus*cpuPeriod)), 1000), uint64(cpuPeriod) // the kernel's minimum quota is 1 ms
		res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	if memory > 0 {
		want = append(want, cgroup1.Memory)
		limit := memory
		res.Memory = &specs.LinuxMemory{Limit: &limit}
	}
	var subs []cgroup1.Subsystem
	dirs := map[cgroup1.Name]string{}
	own := homePath()
	for _, s := range all {
		p, ok := s.(pather)
		if !ok || !slices.Contains(want, s.Name()) {
			continue
		}
		path, err := own(s.Name())
		if err != nil {
			return nil, fmt.Errorf("finding tollgate's cgroup v1 %s: %w", s.Name(), err)
		}
		subs = append(subs, s)
		dirs[s.Name()] = p.Path(path)
	}
	for _, w := range want {
		if dirs[w] == "" {
			return nil, fmt.Errorf("no cgroup v1 %s hierarchy is mounted", w)
		}
	}
	hier := func() ([]cgroup1.Subsystem, error) { return subs, nil }
	parent, err := cgroup1.Load(own, cgroup1.WithHierarchy(hier))
	if err != nil {
		return nil, fmt.Errorf("finding tollgate's cgroup v1 %v: %w", want, err)
	}
	if res.Memory != nil {
		// Swap counts against memsw, which must then be as low: no swap.
		if _, err := os.Stat(filepath.Join(dirs[cgroup1.Memory], "memory.memsw.limit_in_bytes")); err == nil {
			res.Memory.Swap = res.Memory.Limit
		}
	}
	l := &v1Limits{hier: hier, home: own, parent: parent, res: res, dirs: dirs}
	probe, err := l.create(cgroupPrefix() + "probe-" + randomSuffix())
	if err != nil {
		return nil, fmt.Errorf("tollgate may not make limited cgroups in its cgroup v1 %v: %w", want, err)
	}
	if err := probe.Delete(); err != nil {
		log.Warn("cannot remove the cgroup v1 probe", "err", err)
	}
	for _, d := range dirs {
		if _, done := v1Swept.LoadOrStore(d, true); !done {
			sweepV1(d, log)
		}
	}
	return l, nil
}

// create makes the cgroups called name, with the limits, under tollgate's.
func (l *v1Limits) create(name string) (cgroup1.Cgroup, error) {
	under := func(n cgroup1.Name) (string, error) {
		home, err := l.home(n)
		if err != nil {
			return "", err
		}
		return filepath.Join(home, name), nil
	}
	return cgroup1.New(under, l.res, cgroup1.WithHierarchy(l.hier))
}

// group makes the cgroups of one instance, called name.
func (l *v1Limits) group(name string) (*v1Group, error) {
	cg, err := l.create(name)
	if err != nil {
		return nil, err
	}
	g := &v1Group{cg: cg, parent: l.parent, name: name}
	if d := l.dirs[cgroup1.Memory]; d != "" {
		g.memDir = filepath.Join(d, name)
	}
	return g, nil
}

// v1Group is one instance's cgroups in the v1 hierarchies.
type v1Group struct {
	cg     cgroup1.Cgroup
	parent cgroup1.Cgroup
	name   string
	memDir string // its memory cgroup's directory, "" without one
	// removed: remove has removed the cgroups (only the instance's
	// goroutines that close its meter touch it, one after another)
	removed bool
}

// join moves thread tid into the instance's cgroups: what it forks next
// is born there.
func (g *v1Group) join(tid int) error {
	return g.cg.AddTask(cgroup1.Process{Pid: tid})
}

// leave moves thread tid back to tollgate's own cgroups.
func (g *v1Group) leave(tid int) error {
	return g.parent.AddTask(cgroup1.Process{Pid: tid})
}

// kill sends SIGKILL to every process in the instance's cgroups (v1 has
// no cgroup.kill); it reports whether any was left.
func (g *v1Group) kill() bool {
	left, self := false, os.Getpid()
	for _, n := range []cgroup1.Name{cgroup1.Memory, cgroup1.Cpu} {
		procs, err := g.cg.Processes(n, true)
		if err != nil {
			continue
		}
		for _, p := range procs {
			if p.Pid == self {
				// tollgate's forking thread is in the cgroup (a fork in
				// progress, or a leave that failed): v1 lists a process
				// when any of its threads is there. Never kill tollgate.
				continue
			}
			left = true
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	}
	return left
}

// remove kills what is left in the instance's cgroups, for at most wait,
// and removes them.
func (g *v1Group) remove(wait time.Duration) error {
	if g.removed {
		return nil
	}
	for deadline := time.Now().Add(wait); g.kill() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if err := g.cg.Delete(); err != nil {
		return fmt.Errorf("removing cgroup v1 %s: %w", g.name, err)
	}
	g.removed = true
	return nil
}

// oomKilled reports whether the kernel's OOM killer killed a process of
// the instance: memory.oom_control's oom_kill (Linux ≥ 4.13); on older
// kernels, a limit hit (memory.failcnt) and a main process killed by
// SIGKILL.
func (g *v1Group) oomKilled(state *os.ProcessState) bool {
	st, err := g.cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil || st.Memory == nil {
		return false
	}
	if st.MemoryOomControl != nil && st.MemoryOomControl.OomKill > 0 {
		return true
	}
	if b, err := os.ReadFile(filepath.Join(g.memDir, "memory.oom_control")); err == nil && strings.Contains(string(b), "oom_kill ") {
		return false // the kernel counts OOM kills, and counted none
	}
	if st.Memory.Usage == nil || st.Memory.Usage.Failcnt == 0 || state == nil {
		return false
	}
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// sweepV1 kills and removes the v1 cgroups under dir of instances whose
// tollgate (of this pid namespace) is no longer running.
func sweepV1(dir string, log *slog.Logger) {
	for _, cg := range orphanCgroups(dir) {
		if err := killAndRemoveV1(cg); err != nil {
			log.Warn("cannot remove the cgroup v1 of an instance whose tollgate died", "cgroup", cg, "err", err)
			continue
		}
		log.Warn("removed the cgroup v1 of an instance whose tollgate died, killing what was left in it", "cgroup", cg)
	}
}

// killAndRemoveV1 kills the processes of the v1 cgroup at dir (a leaf:
// tollgate makes no nested ones) and removes it, for at most 2 s.
func killAndRemoveV1(dir string) error {
	var err error
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, rerr := os.ReadFile(filepath.Join(dir, "cgroup.procs")); rerr == nil {
			for f := range strings.FieldsSeq(string(b)) {
				if pid, perr := strconv.Atoi(f); perr == nil && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
	}
	return err
}
