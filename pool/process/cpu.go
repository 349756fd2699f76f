package process

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// cpuMeter measures the CPU time of one instance: from the cgroup v2 the
// runner made for it, or else from /proc for its process tree.
type cpuMeter struct {
	log       *slog.Logger
	cgroupDir string   // "" when measuring from /proc
	fd        int      // open directory of cgroupDir, or -1
	v1        *v1Group // the cgroup v1 limits, or nil

	mu    sync.Mutex
	pid   int
	last  time.Duration // the largest reading so far: readings never go back
	final bool          // the instance is gone; last is its total
	oom   bool          // the OOM killer killed one of its processes
}

// newCPUMeter makes the cgroup of an instance of service (id names it;
// "spare" for a spare supervisor's) when the runner has a place for it,
// and falls back to /proc otherwise.
func (r *Runner) newCPUMeter(service, id string, log *slog.Logger) *cpuMeter {
	m := &cpuMeter{log: log, fd: -1}
	name := fmt.Sprintf("%s%d-%s-%s-%s", cgroupPrefix(), os.Getpid(), cgroupName(service), cgroupName(id), randomSuffix())
	if r.v1 != nil {
		g, err := r.v1.group(name)
		if err != nil {
			log.Warn("cannot make the instance's cgroup v1; it runs unlimited", "cgroup", name, "err", err)
		}
		m.v1 = g
	}
	if r.cgroup == "" {
		return m
	}
	dir := filepath.Join(r.cgroup, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		log.Warn("cannot create the instance's cgroup; measuring its CPU time from /proc", "err", err)
		return m
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		log.Warn("cannot open the instance's cgroup; measuring its CPU time from /proc", "err", err)
		return m
	}
	m.cgroupDir, m.fd = dir, fd
	if err := r.applyLimits(dir); err != nil {
		log.Warn("cannot limit the instance's cgroup; it runs unlimited", "cgroup", dir, "err", err)
	}
	return m
}

// cgroupName keeps the characters of s that are safe in a cgroup's name,
// at most 40 of them.
func cgroupName(s string) string {
	b := []byte(s)
	out := b[:0]
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.':
			out = append(out, c)
		default:
			out = append(out, '_')
		}
	}
	if len(out) > 40 {
		out = out[:40]
	}
	return string(out)
}

func (m *cpuMeter) cgroupFD() int { return m.fd }

func (m *cpuMeter) started(pid int) {
	m.mu.Lock()
	m.pid = pid
	m.mu.Unlock()
}

// dropCgroup gives up the cgroup before the process started.
func (m *cpuMeter) dropCgroup() {
	if m.fd >= 0 {
		_ = syscall.Close(m.fd)
		_ = os.Remove(m.cgroupDir)
	}
	m.cgroupDir, m.fd = "", -1
}

// killCgroup kills every process in the instance's cgroup, also those
// that left its process group (Linux ≥ 5.14; a no-op before).
func (m *cpuMeter) killCgroup() {
	if m.cgroupDir != "" {
		_ = os.WriteFile(filepath.Join(m.cgroupDir, "cgroup.kill"), []byte("1"), 0)
	}
	if m.v1 != nil {
		m.v1.kill()
	}
}

// exited records the total once the main process has been reaped.
func (m *cpuMeter) exited(state *os.ProcessState) {
	total, ok := m.measure()
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok && total > m.last {
		m.last = total
	}
	if m.cgroupDir == "" && state != nil {
		// The rusage of the reaped process covers it and the children
		// it waited for.
		if t := state.UserTime() + state.SystemTime(); t > m.last {
			m.last = t
		}
	}
	m.final = true
	m.oom = oomKilled(m.cgroupDir) || m.v1 != nil && m.v1.oomKilled(state)
}

// oomKilled reports whether the OOM killer killed a process of the
// instance; valid once exited has been called.
func (m *cpuMeter) oomKilled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.oom
}

// close removes the cgroups once they are empty, taking a last reading.
func (m *cpuMeter) close() {
	if m.v1 != nil {
		if err := m.v1.remove(5 * time.Second); err != nil {
			m.log.Warn("cannot remove the instance's cgroup v1", "err", err)
		}
	}
	if m.cgroupDir == "" {
		return
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ev, err := os.ReadFile(filepath.Join(m.cgroupDir, "cgroup.events")); err != nil || bytes.Contains(ev, []byte("populated 0")) || time.Now().After(deadline) {
			break
		}
		m.killCgroup()
		time.Sleep(20 * time.Millisecond)
	}
	if total, ok := readCgroupCPU(m.cgroupDir); ok {
		m.mu.Lock()
		if total > m.last {
			m.last = total
		}
		m.mu.Unlock()
	}
	if err := os.Remove(m.cgroupDir); err != nil {
		m.log.Warn("cannot remove the instance's cgroup", "cgroup", m.cgroupDir, "err", err)
	}
	_ = syscall.Close(m.fd)
}

// read returns the CPU time so far; false when it cannot be measured.
func (m *cpuMeter) read() (time.Duration, bool) {
	m.mu.Lock()
	final, last := m.final, m.last
	m.mu.Unlock()
	if final {
		return last, true
	}
	total, ok := m.measure()
	if !ok {
		return last, last > 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if total > m.last {
		m.last = total
	}
	return m.last, true
}

func (m *cpuMeter) measure() (time.Duration, bool) {
	if m.cgroupDir != "" {
		return readCgroupCPU(m.cgroupDir)
	}
	m.mu.Lock()
	pid := m.pid
	m.mu.Unlock()
	if pid == 0 {
		return 0, false
	}
	return treeCPU(pid)
}

// readCgroupCPU reads usage_usec from a cgroup v2 cpu.stat.
func readCgroupCPU(dir string) (time.Duration, bool) {
	f, err := os.Open(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err == nil
		}
	}
	return 0, false
}

// treeCPU sums the CPU time of process pid, the members of its process
// group and all their descendants, including the children they have
// waited for, from /proc.
func treeCPU(pid int) (time.Duration, bool) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0, false
	}
	stats := make([]procfs.ProcStat, 0, len(procs))
	for _, p := range procs {
		if st, err := p.Stat(); err == nil { // a process may be gone by now
			stats = append(stats, st)
		}
	}
	in := map[int]bool{pid: true}
	for changed := true; changed; {
		changed = false
		for _, st := range stats {
			if !in[st.PID] && (st.PGRP == pid || in[st.PPID]) {
				in[st.PID], changed = true, true
			}
		}
	}
	var ticks int64
	found := false
	for _, st := range stats {
		if in[st.PID] {
			found = found || st.PID == pid
			ticks += int64(st.UTime) + int64(st.STime) + int64(st.CUTime) + int64(st.CSTime)
		}
	}
	// /proc counts in USER_HZ, 100 a second on every Linux Go supports.
	return time.Duration(ticks) * (time.Second / 100), found
}

// The cgroup v2 directory under which instances' cgroups are made,
// detected once per process.
var detected struct {
	once sync.Once
	dir  string
}

// cgroupParent returns the cgroup v2 directory to make instances' cgroups
// in, or "" when there is none. It says which way CPU time is measured in
// the log, once per process, and removes the cgroups of instances whose
// tollgate died.
func cgroupParent(log *slog.Logger) string {
	detected.once.Do(func() {
		dir, err := detectCgroup()
		if err != nil {
			log.Info("CPU time of instances is measured from /proc, for each instance's process tree", "reason", err)
			return
		}
		detected.dir = dir
		log.Info("CPU time of instances is measured from a cgroup v2 per instance", "under", dir)
		sweepCgroups(dir, log)
	})
	return detected.dir
}

// detectCgroup finds this process's cgroup v2 directory and checks that
// it may create cgroups in it.
func detectCgroup() (string, error) {
	self, err := procfs.Self()
	if err != nil {
		return "", fmt.Errorf("reading /proc/self: %w", err)
	}
	cgs, err := self.Cgroups()
	if err != nil {
		return "", fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	path := ""
	for _, cg := range cgs {
		if cg.HierarchyID == 0 {
			path = cg.Path
		}
	}
	if path == "" {
		return "", errors.New("not in a cgroup v2 hierarchy")
	}
	mounts, err := self.MountInfo()
	if err != nil {
		return "", fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	for _, m := range mounts {
		if m.FSType != "cgroup2" {
			continue
		}
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.Root, "/"))
		if !ok {
			continue
		}
		dir := filepath.Join(m.MountPoint, rel)
		if _, err := os.Stat(filepath.Join(dir, "cpu.stat")); err != nil {
			return "", fmt.Errorf("cgroup v2 at %s has no cpu.stat: %w", dir, err)
		}
		probe := filepath.Join(dir, cgroupPrefix()+"probe-"+randomSuffix())
		if err := os.Mkdir(probe, 0o755); err != nil {
			return "", fmt.Errorf("cgroup v2 at %s is not delegated to tollgate: %w", dir, err)
		}
		_ = os.Remove(probe)
		return dir, nil
	}
	return "", fmt.Errorf("no cgroup2 mount holds this process's cgroup %s", path)
}

// cgroupPrefix starts the name of every cgroup tollgate makes:
// "tollgate-<pid namespace>-", followed by the creating tollgate's pid.
func cgroupPrefix() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "tollgate-0-"
	}
	ns = strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]")
	return "tollgate-" + cgroupName(ns) + "-"
}

// sweepCgroups kills and removes the instance cgroups under dir left by a
// tollgate of this pid namespace that is no longer running (one killed by
// SIGKILL: Linux's parent-death signal reaches only an instance's main
// process, not what that process started).
func sweepCgroups(dir string, log *slog.Logger) {
	for _, cg := range orphanCgroups(dir) {
		_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if os.Remove(cg) == nil {
				log.Warn("removed the cgroup of an instance whose tollgate died, killing what was left in it", "cgroup", cg)
				break
			}
		}
	}
}

// orphanCgroups lists the instance cgroups (v1 or v2) under dir whose
// tollgate, named by the pid in the cgroup's name, is no longer running in
// this pid namespace.
func orphanCgroups(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	prefix := cgroupPrefix()
	var orphans []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		owner, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(owner)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		orphans = append(orphans, filepath.Join(dir, e.Name()))
	}
	return orphans
}
