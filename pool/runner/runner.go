// Package runner is the seam between the pool and what runs its
// instances: local processes (package pool/process) and the pods of a
// Kubernetes Deployment (package pool/kube). A Runner starts instances; an
// Instance reports its address, readiness, exit and CPU time; the optional
// interfaces (Warmer, Sharer, LoadSharer, GPURunner, CPUAllocator) tell
// the pool more when a runner knows it. The pool never starts a process
// itself, and a runner never decides a count.
//
// Package pool names these types too (pool.Runner is runner.Runner), so
// that a user of the pool needs one import; a runner imports only this
// package.
package runner

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// ErrOOMKilled is wrapped by Instance.Err when the instance was killed by
// the kernel's OOM killer for going over its memory limit; the pool logs
// and counts such an exit with reason oom_killed.
var ErrOOMKilled = errors.New("killed by the OOM killer (over its memory limit)")

// Runner starts the instances of one service revision. It is safe for
// concurrent use. A Runner that is also an [io.Closer] is closed when its
// revision has stopped its last instance (retired, or the pool stopped);
// give each revision a runner of its own.
type Runner interface {
	// Start launches one instance and returns as soon as it has been
	// started, not once it is ready (see Instance.Ready). ctx bounds the
	// start only; the instance lives until Stop or until it exits on its
	// own. An error means nothing was left running.
	Start(ctx context.Context, spec InstanceSpec) (Instance, error)
}

// Warmer is implemented by a Runner that can prepare its next Start ahead
// of time: a process runner with a supervisor starts an idle spare
// supervisor, so that the first request to a service scaled to zero does
// not wait for the supervisor's own start. The pool calls Warm when a
// revision begins to run with no instance to start at once; what Warm
// prepares is released when ctx ends. Warm returns without waiting.
type Warmer interface {
	Warm(ctx context.Context, service string)
}

// Sharer is implemented by a Runner whose instances other tollgate
// replicas send requests to as well: the pods of a Deployment behind
// several tollgate replicas. Sharers is how many replicas share each
// instance now (1 when this one is alone); the pool then lets this replica
// send an instance at most max(1, MaxConcurrency/Sharers) requests at
// once, as Knative's activators divide a pod's capacity among themselves,
// so that one instance never receives more than its maximum concurrency
// from all replicas together. The engine measures this replica's traffic
// against that share, and its count is what this replica needs (unless
// the runner is a LoadSharer, whose policy decides); requests beyond the
// share wait in the pending queue. The pool reads Sharers once a second.
type Sharer interface {
	Sharers() int
}

// LoadSharer is a Sharer whose replicas split each instance's capacity by
// their load rather than evenly, and decide the instance count together
// from the service's total load rather than each from its own (pool/kube
// with leader election: the leader sums every replica's measured load).
type LoadSharer interface {
	Sharer
	// Share is this replica's part of maxConcurrency: how many requests
	// it may send one instance at once. The pool reads it once a second,
	// in place of maxConcurrency/Sharers, and keeps it in [1,
	// maxConcurrency]. The replicas' shares must not sum above
	// maxConcurrency, also while they change (pool/kube: one split the
	// leader publishes, lowered before it is raised).
	Share(maxConcurrency int) int
	// SharedPolicy returns the policy of one revision's engine (key names
	// it: service/revision, the same for every call of that revision):
	// cfg is the revision's configured config (the whole maximum
	// concurrency of an instance), share the engine's MaxConcurrency, and
	// local the policy the engine would use alone. It is called again
	// whenever cfg or share changes; the engine calls the policy once a
	// second with this replica's metrics, with its revision's lock held, so
	// it must not block.
	SharedPolicy(key string, cfg autoscale.Config, share int, local autoscale.Policy) autoscale.Policy
}

// Basis is what a shared policy's last count was decided on, for the
// scale log and the live view: a LoadSharer's policy says it through
// BasisPolicy.
type Basis struct {
	// Service is true when the count was decided on every replica's load
	// (the service's total), false when on this replica's alone (no
	// leader's decision known yet).
	Service bool
	// NeedCPU, NeedConcurrency and NeedACT are the instances each driver
	// asked for on that load, before rounding; InFlight its requests in
	// flight. All zero when unknown (a leader of an earlier release).
	NeedCPU, NeedConcurrency, NeedACT float64
	InFlight                          int
}

// BasisPolicy is implemented by a LoadSharer's policy that can say what
// its last Recommend decided on. The pool asks after each decision, with
// the lock it calls Recommend with held.
type BasisPolicy interface {
	autoscale.Policy
	Basis() Basis
}

// GPURunner is implemented by a Runner that learns from what it runs how
// many GPUs each instance has (a Deployment's pod template asking for
// nvidia.com/gpu). The pool reads GPUs once a second; when it is above the
// service's own Config.GPUs, the engine takes it, and so keeps idle
// instances 10 minutes at most (autoscale.DefaultGPUIdleTimeout: a longer
// idle timeout is lowered to it).
type GPURunner interface {
	GPUs() int
}

// InstanceSpec names one instance for its Runner.
type InstanceSpec struct {
	// Service is the service's name (K_SERVICE, K_CONFIGURATION).
	Service string
	// Revision is the revision's name (K_REVISION).
	Revision string
	// ID identifies the instance in logs and metrics; unique per service.
	ID string
}

// Instance is one running instance. Its methods are safe for concurrent use.
type Instance interface {
	// Addr is the host:port requests are proxied to. A runner whose
	// instances get their address only once ready (a pod of a Deployment)
	// returns "" until Ready has returned nil; the pool reads it again
	// then.
	Addr() string

	// Ready blocks until the instance passes its readiness check, and
	// returns nil then. It returns an error if ctx ends, the runner's
	// readiness timeout passes or the instance exits first.
	Ready(ctx context.Context) error

	// Done is closed once the instance has exited, for any reason.
	Done() <-chan struct{}

	// Err says why the instance exited once Done is closed: nil after a
	// Stop, the exit status or signal otherwise.
	Err() error

	// Stop asks the instance to stop (SIGTERM for a process), waits up to
	// grace for it to exit, then kills it. It returns once the instance
	// has exited; calling it again, or after the instance exited, is a
	// no-op.
	Stop(grace time.Duration) error

	// CPUTime is the CPU time the instance has used since it started
	// (user + system, all its processes), and false when it cannot be
	// measured.
	CPUTime() (time.Duration, bool)

	// PID is the instance's main process ID, or 0 when it has none
	// (a pod).
	PID() int
}

// CPUAllocator is implemented by an Instance that knows the CPU it is
// given, which may differ from the service's CPUsPerInstance: a pod, whose
// allocation is the sum of its containers' CPU limits (or requests). The
// pool then divides the instance's CPU usage by that allocation, not by
// the service's CPUsPerInstance, wherever the engine reads utilisation
// (the CPU driver, ACT).
type CPUAllocator interface {
	// CPUs is the instance's CPU allocation in cores; false while it is
	// not known (then CPUsPerInstance is used).
	CPUs() (float64, bool)
}
