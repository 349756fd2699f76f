package process

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tollgate/tollgate/pool"
)

// cpuPeriod is the cgroup v2 cpu.max period, in microseconds (the
// kernel's default): cpus × cpuPeriod may run in each period.
const cpuPeriod = 100_000

// limited reports whether the runner has limits to enforce.
func (r *Runner) limited() bool { return r.opts.CPUs > 0 || r.opts.Memory > 0 }

// checkLimits says once, at New, when the limits cannot be enforced: no
// cgroup v2 of tollgate's own, or one whose cpu and memory controllers
// are not enabled for its children (and cannot be). Instances then run
// unlimited, as before, and cpus stays only the utilisation divisor.
func (r *Runner) checkLimits() {
	if !r.limited() {
		return
	}
	if r.cgroup == "" {
		r.log.Warn("cpus and memory are not enforced: no writable cgroup v2 to put instances in; instances run unlimited and cpus is only the utilisation divisor")
		r.unlimited = true
		return
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
		return
	}
	var enable []byte
	for _, c := range missing {
		enable = append(enable, "+"+c+" "...)
	}
	if err := os.WriteFile(ctl, bytes.TrimSpace(enable), 0); err != nil {
		avail, _ := os.ReadFile(filepath.Join(r.cgroup, "cgroup.controllers"))
		r.log.Warn("cpus and memory are not enforced: the cgroup's controllers cannot be enabled for instances; instances run unlimited and cpus is only the utilisation divisor",
			"cgroup", r.cgroup, "missing", missing, "available", string(bytes.TrimSpace(avail)), "err", err)
		r.unlimited = true
	}
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
func wrapOOM(err error) error { return fmt.Errorf("%w: %w", pool.ErrOOMKilled, err) }
