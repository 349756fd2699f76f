package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/tollgate/tollgate/pool/runner"
)

// Runner runs one service's instances as pods of one Deployment. It is a
// [runner.Runner]; its methods are safe for concurrent use.
type Runner struct {
	o       Options
	log     *slog.Logger
	m       *metrics
	running atomic.Bool
	leading atomic.Bool
	// adoptUntil (Unix ns) ends the window in which replicas are not
	// lowered after leading starts (Options.AdoptFor).
	adoptUntil atomic.Int64
	kick       chan struct{} // wakes the scale loop; buffer 1, non-blocking send
	closed     chan struct{} // closed once Run's context has ended
	epKick     func()        // queues an EndpointSlice sync; set by Run
	lister     discoverylisters.EndpointSliceLister

	mu       sync.Mutex
	live     int                  // instances the replica count asks for
	pending  []*instance          // started, not yet bound, FIFO
	bound    map[string]*instance // pod key → instance holding it
	ready    map[string]endpoint  // pod key → ready endpoint, as of the last sync
	retired  map[string]bool      // pods of stopped instances, until they leave the slices
	selector string               // the scaled resource's pod selector (scale status)
	cpu      cpuState
	alloc    allocState

	// Shared mode (Options.Election; replicas.go), guarded by mu.
	reportKey      string               // this replica's annotation on the report Lease
	reportKick     chan struct{}        // wakes the report loop; buffer 1
	beat           uint64               // heartbeat counter in the report
	forceReport    bool                 // publish even if unchanged (the report Lease was deleted)
	reportsSynced  func() bool          // the report Lease has been read once
	peers          map[string]peer      // other replicas' reports, by annotation key
	unlistedLogged []string             // replicas last logged as holding pods their reports do not list
	badReports     map[string]string    // unreadable reports, by key: warned once per value
	leaderID       string               // the Lease holder's identity, as last seen
	peerRetiring   map[string]bool      // pods the current leader is letting go: not bound
	seen           retiringSeen         // the leader's retiring list this replica applies
	victims        map[string]victim    // leading: pods chosen to go
	retiringGen    uint64               // leading: changes whenever victims do
	marked         map[string]bool      // pods given the lowest deletion cost, by pod name (shared mode)
	swept          bool                 // leading: marks left by an earlier leader were read
	requeue        func(time.Duration)  // leading: sync the scale again after a while
	locals         map[string]localLoad // this replica's engines' last loads, by revision (decide.go)
	total          totalDecider         // leading: the decision on every replica's load
	decided        *decision            // leading: the last decision, for the report and the scale loop
	decidedAt      time.Time            // when it was made
	shares         shareApplier         // the split of each pod this replica routes by (assign.go)
	plan           sharePlan            // leading: the split published and the one moved to

	gpus atomic.Int64 // GPUs per pod of the Deployment's template (gpu.go)
}

// endpoint is one ready pod as the Service's EndpointSlices list it.
type endpoint struct {
	pod  string // pod name; empty when the endpoint names no pod
	ip   string
	port int
}

var (
	_ runner.Runner       = (*Runner)(nil)
	_ runner.CPUAllocator = (*instance)(nil)
)

// New checks opts and returns a runner; nothing starts until Run. Its
// error wraps ErrOptions.
func New(opts Options) (*Runner, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	r := &Runner{
		o:       opts,
		log:     opts.Logger.With("target", opts.Target.String()),
		m:       newMetrics(opts.Registry, opts.Target.String()),
		kick:    make(chan struct{}, 1),
		closed:  make(chan struct{}),
		epKick:  func() {},
		bound:   map[string]*instance{},
		ready:   map[string]endpoint{},
		retired: map[string]bool{},

		reportKick:    make(chan struct{}, 1),
		peers:         map[string]peer{},
		peerRetiring:  map[string]bool{},
		badReports:    map[string]string{},
		victims:       map[string]victim{},
		marked:        map[string]bool{},
		requeue:       func(time.Duration) {},
		locals:        map[string]localLoad{},
		reportsSynced: func() bool { return false },
	}
	if opts.Election != nil {
		r.reportKey = reportKey(opts.Election.Identity)
	}
	r.cpu.samples = map[string]*cpuSample{}
	r.alloc.cores = map[string]float64{}
	return r, nil
}

// Target returns the runner's target with its defaults filled in.
func (r *Runner) Target() Target { return r.o.Target }

// Start registers one instance: the replica count asked for grows by one
// and the instance binds to the next ready pod no other instance holds.
// It returns at once; Instance.Ready waits for the pod.
func (r *Runner) Start(ctx context.Context, spec runner.InstanceSpec) (runner.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	in := &instance{r: r, spec: spec, started: time.Now(), boundCh: make(chan struct{}), done: make(chan struct{}), gone: make(chan struct{})}
	r.mu.Lock()
	r.live++
	r.pending = append(r.pending, in)
	r.bindLocked()
	r.mu.Unlock()
	r.poke()
	return in, nil
}

// poke wakes the scale loop, and the report loop in shared mode, without
// blocking.
func (r *Runner) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
	r.reportNow()
}

// bindLocked binds pending instances, oldest first, to free ready pods
// (neither bound nor retired), in pod-name order; r.mu is held.
func (r *Runner) bindLocked() {
	if len(r.pending) == 0 {
		return
	}
	free := r.freeLocked()
	for len(r.pending) > 0 && len(free) > 0 {
		in, key := r.pending[0], free[0]
		r.pending, free = r.pending[1:], free[1:]
		ep := r.ready[key]
		in.pod, in.podName = key, ep.pod
		in.addr = r.o.Address(ep.pod, ep.ip, ep.port)
		in.state = stateBound
		r.bound[key] = in
		close(in.boundCh)
		r.log.Info("instance bound to a ready pod", "instance", in.spec.ID, "pod", key, "addr", in.addr, "after", time.Since(in.started).Round(time.Millisecond))
		r.reportNow()
	}
}

// freeLocked lists ready pods no instance holds, no Stop retired and no
// leader is letting go (shared mode), in name order.
func (r *Runner) freeLocked() []string {
	var free []string
	for key := range r.ready {
		if _, victim := r.victims[key]; r.bound[key] == nil && !r.retired[key] && !r.peerRetiring[key] && !victim {
			free = append(free, key)
		}
	}
	slices.Sort(free)
	return free
}

// setReady replaces the ready set (an EndpointSlice sync): instances whose
// pod left it end, pending ones bind, retired pods no longer listed at all
// are forgotten.
func (r *Runner) setReady(ready map[string]endpoint, listed map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready = ready
	r.m.ready.Set(float64(len(ready)))
	for key, in := range r.bound {
		if _, ok := ready[key]; ok {
			continue
		}
		switch in.state {
		case stateBound:
			delete(r.bound, key)
			r.live--
			in.finishLocked(fmt.Errorf("pod %s: %w", key, ErrPodGone))
			r.log.Warn("instance's pod left the ready set", "instance", in.spec.ID, "pod", key)
		case stateStopping:
			in.closeGone()
		}
	}
	for key := range r.retired {
		if !listed[key] {
			delete(r.retired, key)
		}
	}
	for key := range r.victims {
		if _, ok := ready[key]; !ok {
			delete(r.victims, key) // gone, or no longer ready: nothing to protect
			r.retiringGen++
		}
	}
	r.bindLocked()
	r.reportNow()
}

// Instance states, guarded by Runner.mu.
const (
	statePending  = iota // waiting for a pod
	stateFailed          // readiness timed out; waits for Stop
	stateBound           // holds a ready pod
	stateStopping        // Stop in progress
	stateDone            // Done closed
)

// instance is one runner.Instance: a claim on one ready pod.
type instance struct {
	r       *Runner
	spec    runner.InstanceSpec
	started time.Time
	boundCh chan struct{} // closed once bound
	done    chan struct{} // closed once finished
	gone    chan struct{} // closed when a stopping instance's pod left the ready set

	// guarded by r.mu
	state    int
	pod      string // key in Runner.ready
	podName  string // the pod's name, empty when the endpoint names none
	addr     string
	err      error
	readyErr error
	goneOnce bool
	cpuLast  time.Duration
}

var _ runner.Instance = (*instance)(nil)

// Addr is the bound pod's address; empty until Ready has returned nil.
func (in *instance) Addr() string {
	in.r.mu.Lock()
	defer in.r.mu.Unlock()
	return in.addr
}

// Ready waits until the instance is bound to a ready pod.
func (in *instance) Ready(ctx context.Context) error {
	r := in.r
	t := time.NewTimer(time.Until(in.started.Add(r.o.ReadyTimeout)))
	defer t.Stop()
	select {
	case <-in.done:
		return in.readyFailure()
	case <-in.boundCh:
		select {
		case <-in.done:
			return in.readyFailure()
		default:
			return nil
		}
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch in.state {
	case statePending:
		r.pending = slices.DeleteFunc(r.pending, func(p *instance) bool { return p == in })
		in.state = stateFailed
		in.readyErr = fmt.Errorf("%w (%v)", ErrReadyTimeout, r.o.ReadyTimeout)
		r.log.Warn("no ready pod for an instance within the readiness timeout", "instance", in.spec.ID, "timeout", r.o.ReadyTimeout)
		return in.readyErr
	case stateFailed:
		return in.readyErr
	case stateBound:
		return nil
	}
	return fmt.Errorf("instance %s: %w", in.spec.ID, ErrStopped)
}

func (in *instance) readyFailure() error {
	in.r.mu.Lock()
	defer in.r.mu.Unlock()
	if in.readyErr != nil {
		return in.readyErr
	}
	if in.err != nil {
		return in.err
	}
	return fmt.Errorf("instance %s: %w", in.spec.ID, ErrStopped)
}

// Done is closed once the instance's pod left the ready set or Stop ended.
func (in *instance) Done() <-chan struct{} { return in.done }

// Err wraps ErrPodGone when the pod left on its own; nil after Stop.
func (in *instance) Err() error {
	in.r.mu.Lock()
	defer in.r.mu.Unlock()
	return in.err
}

// PID is 0: a pod has no process tollgate knows.
func (in *instance) PID() int { return 0 }

// finishLocked closes Done with err; r.mu is held.
func (in *instance) finishLocked(err error) {
	if in.state == stateDone {
		return
	}
	in.state = stateDone
	in.err = err
	in.closeGone()
	close(in.done)
}

func (in *instance) closeGone() {
	if !in.goneOnce {
		in.goneOnce = true
		close(in.gone)
	}
}

// Stop lets the instance's pod go: without leader election, it sets the
// pod's deletion cost to the lowest value, lowers the count asked for,
// and waits up to grace for the pod to leave the ready set. Under leader
// election (several replicas may use the pod) it only releases the pod and
// lowers its ask; the leader lets go of pods no replica holds. Stopping an
// instance not yet bound just withdraws it.
func (in *instance) Stop(grace time.Duration) error {
	r := in.r
	r.mu.Lock()
	switch in.state {
	case stateDone:
		r.mu.Unlock()
		return nil
	case stateStopping:
		r.mu.Unlock()
		<-in.done
		return nil
	case statePending, stateFailed:
		r.pending = slices.DeleteFunc(r.pending, func(p *instance) bool { return p == in })
		r.live--
		in.finishLocked(nil)
		r.mu.Unlock()
		r.poke()
		return nil
	}
	in.state = stateStopping
	key, name := in.pod, in.podName
	lead := r.leading.Load() && !r.isClosed()
	if r.leading.Load() {
		// The engine lets an instance go: it has seen the traffic, so the
		// adoption window (Options.AdoptFor) has served its purpose.
		r.adoptUntil.Store(0)
	}
	lead = lead && !r.shared()
	if lead {
		r.retired[key] = true
	}
	r.mu.Unlock()

	var err error
	if lead && name != "" {
		ctx, cancel := context.WithTimeout(context.Background(), max(grace, 5*time.Second))
		err = r.markForDeletion(ctx, name)
		cancel()
	}
	r.mu.Lock()
	r.live--
	r.mu.Unlock()
	r.poke()
	if lead {
		t := time.NewTimer(grace)
		select {
		case <-in.gone:
		case <-t.C:
		case <-r.closed: // tollgate is stopping: the pods stay for the next one
		}
		t.Stop()
	}
	r.mu.Lock()
	delete(r.bound, key)
	in.finishLocked(nil)
	r.bindLocked() // a follower's released pod is free again
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("stop %s: %w", in.spec.ID, err)
	}
	return nil
}

func (r *Runner) isClosed() bool {
	select {
	case <-r.closed:
		return true
	default:
		return false
	}
}

// errNotRunning is returned by Run when called twice.
var errNotRunning = errors.New("kube: Run called twice")
