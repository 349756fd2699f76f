package pool

import "time"

// NewWithOverMaxGrace is New with the bound on an unhealthy instance's
// drain (MaxOverMaxGrace) set to grace, so that a test sees the bound
// act in seconds.
func NewWithOverMaxGrace(opts Options, grace time.Duration) *Pool {
	p := New(opts)
	p.overMaxGrace = grace
	return p
}
