package process

// CgroupDir returns the cgroup v2 directory r makes instances' cgroups
// in, or "" when it measures CPU time from /proc.
func (r *Runner) CgroupDir() string { return r.cgroup }
