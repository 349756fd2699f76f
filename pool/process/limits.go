package process

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tollgate/tollgate/pool/runner"
)

// cpuPeriod is the cgroup v2 cpu.max period, in microseconds (the
// kernel's default): cpus × cpuPeriod may run in each period.
const cpuPeriod = 100_000

// limited reports whether the runner has limits to enforce.
func (r *Runner) limited() bool { return r.opts.CPUs > 0 || r.opts.Memory > 0 }

// checkLimits chooses, at New, how the limits are enforced: with the cpu
// and memory controllers of tollgate's cgroup v2, enabled for its
// children; else with cgroup v1's (see v1Limits); else not at all, which
// it says once: instances then run unlimited, as before, and cpus stays
// only the utilisation divisor.
func (r *Runner) checkLimits() {
	if !r.limited() {
		return
	}
	if r.opts.NoCgroup {
		r.log.Warn("cpus and memory are not enforced: the runner makes no cgroups (NoCgroup); instances run unlimited and cpus is only the utilisation divisor")
		r.unlimited = true
		return
	}
	v2err := r.enableV2()
	if v2err == nil {
		r.log.Info("cpus and memory are enforced with cgroup v2", "under", r.cgroup, "cpus", r.opts.CPUs, "memory", r.opts.Memory)
		return
	}
	r.unlimited = true // for cgroup v2's part: cpu.max and memory.max are not written
	v1, v1err := newV1Limits(r.opts.CPUs, r.opts.Memory, r.log)
	if v1err == nil {
		r.v1 = v1
		r.log.Info("cpus and memory are enforced with cgroup v1", "cgroup v2", v2err.Error(), "cpus", r.opts.CPUs, "memory", r.opts.Memory)
		return
	}
	r.log.Warn("cpus and memory are not enforced: neither cgroup v2 nor cgroup v1 is writable for instances; instances run unlimited and cpus is only the utilisation divisor",
		"cgroup v2", v2err.Error(), "cgroup v1", v1err.Error())
}

// enableV2 makes sure the controllers the limits need are enabled for the
// children of tollgate's cgroup v2, or says why they cannot be.
func (r *Runner) enableV2() error {
	if r.cgroup == "" {
		return errors.New("no writable cgroup v2 to put instances in")
	}
	want := [][]byte{}
	if r.opts.CPUs > 0 {
		want = append(want, []byte("cpu"))
	}
	if r.opts.Memory > 0 {
		want = append(want, []byte("memory"))
	}
	ctl := filepath.Join(r.cgroup, "cgroup.subtree_control")
	have, err := os.ReadFile(ctl)
	var missing []string
	for _, c := range want {
		if err != nil || !hasWord(have, c) {
			missing = append(missing, string(c))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var enable []byte
	for _, c := range missing {
		enable = append(enable, "+"+c+" "...)
	}
	if err := os.WriteFile(ctl, bytes.TrimSpace(enable), 0); err != nil {
		avail, _ := os.ReadFile(filepath.Join(r.cgroup, "cgroup.controllers"))
		return fmt.Errorf("the controllers %v of %s cannot be enabled for instances (available: %q): %w", missing, r.cgroup, bytes.TrimSpace(avail), err)
	}
	return nil
}

func hasWord(b, w []byte) bool {
	for _, f := range bytes.Fields(b) {
		if bytes.Equal(f, w) {
			return true
		}
	}
	return false
}

// applyLimits writes the runner's limits into an instance's new cgroup:
// cpu.max from CPUs, memory.max from Memory (and no swap beyond it).
func (r *Runner) applyLimits(dir string) error {
	if !r.limited() || r.unlimited {
		return nil
	}
	var errs []error
	if c := r.opts.CPUs; c > 0 {
		quota := max(int64(math.Ceil(c*cpuPeriod)), 1000) // the kernel's minimum is 1 ms
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, cpuPeriod), 0); err != nil {
			errs = append(errs, fmt.Errorf("cpu.max: %w", err))
		}
	}
	if m := r.opts.Memory; m > 0 {
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), strconv.AppendInt(nil, m, 10), 0); err != nil {
			errs = append(errs, fmt.Errorf("memory.max: %w", err))
		}
		_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0) // absent without swap accounting
	}
	return errors.Join(errs...)
}

// oomKilled reports whether the kernel's OOM killer killed a process of
// the cgroup at dir (memory.events' oom_kill).
func oomKilled(dir string) bool {
	if dir == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.events"))
	if err != nil {
		return false
	}
	for line := range bytes.Lines(b) {
		if k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte(" ")); ok && string(k) == "oom_kill" {
			n, _ := strconv.ParseInt(string(v), 10, 64)
			return n > 0
		}
	}
	return false
}

// wrapOOM marks an exit caused by the OOM killer.
func wrapOOM(err error) error { return fmt.Errorf("%w: %w", runner.ErrOOMKilled, err) }
