package process

// CgroupDir returns the cgroup v2 directory r makes instances' cgroups
// in, or "" when it measures CPU time from /proc.
func (r *Runner) CgroupDir() string { return r.cgroup }

// SparePID returns the pid of r's idle spare supervisor, or 0.
func SparePID(r *Runner) int {
	r.spares.mu.Lock()
	defer r.spares.mu.Unlock()
	if r.spares.idle == nil {
		return 0
	}
	return r.spares.idle.pid
}
