package revision

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/forward"
	"github.com/tollgate/tollgate/pool/runner"
)

// DefaultStopGrace is how long a stopped instance has between SIGTERM and
// the kill when a service sets none: 10 s, as Cloud Run.
const DefaultStopGrace = 10 * time.Second

// MaxOverMaxGrace bounds how long a replaced revision's instances, or an
// unhealthy instance beside its replacement, may keep running beyond max
// instances while they finish their requests in flight: 15 minutes, as
// Cloud Run's grace for instances over max.
const MaxOverMaxGrace = 15 * time.Minute

// Request bounds' defaults (Limits).
const (
	// DefaultRequestTimeout is Cloud Run's default request timeout.
	DefaultRequestTimeout = 300 * time.Second
	// DefaultMaxPending is the default bound on a revision's pending
	// requests: each costs a connection and its buffers (≈ 25 KB
	// measured), so 1,000 keep a node's memory and file descriptors in
	// hand while covering a burst on a service scaling from zero.
	DefaultMaxPending = 1000
)

// Limits are a revision's request bounds.
type Limits struct {
	// RequestTimeout bounds one request from its arrival to its last
	// byte, its pending wait included (Cloud Run's request timeout).
	RequestTimeout time.Duration
	// MaxPending bounds the requests waiting for an instance.
	MaxPending int
	// StopGrace is the time between SIGTERM and the kill.
	StopGrace time.Duration
}

// WithDefaults returns l with its zero (or negative) fields set to the
// defaults: DefaultRequestTimeout, DefaultMaxPending, DefaultStopGrace.
func (l Limits) WithDefaults() Limits {
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = DefaultRequestTimeout
	}
	if l.MaxPending <= 0 {
		l.MaxPending = DefaultMaxPending
	}
	if l.StopGrace <= 0 {
		l.StopGrace = DefaultStopGrace
	}
	return l
}

// Options make a Revision.
type Options struct {
	// Service and Name are the service's name (K_SERVICE) and the
	// revision's (K_REVISION), such as hello and hello-00001.
	Service, Name string
	// Config holds the engine's targets and bounds, as configured.
	Config autoscale.Config
	// Runner starts the instances; required.
	Runner runner.Runner
	// Limits bound the requests; zero fields take the defaults
	// (Limits.WithDefaults).
	Limits Limits
	// Logger receives the revision's logs; nil discards them.
	Logger *slog.Logger
	// Metrics are the series the revision records in; nil: its own,
	// in a registry nothing serves.
	Metrics *Metrics
	// Registrar, when set, is told when each instance is ready and when
	// it stops taking requests.
	Registrar Registrar
	// Liveness, when set, probes every ready instance, its zero fields
	// defaulted (Liveness.WithDefaults); New refuses one that
	// Liveness.Validate refuses.
	Liveness *Liveness
	// OverMaxGrace bounds an unhealthy instance's drain; 0 means
	// MaxOverMaxGrace.
	OverMaxGrace time.Duration
}

// Revision is one service revision: one engine, its instances and its
// waiting requests, driven by one loop (Run). Every field below mu, and
// in the parts it embeds, is guarded by it; no I/O happens while it is
// held. The parts hold one idea each: the instances' starts and their
// crash-loop backoff (starts), the capacity shared with other replicas
// (capacityShare), the registry (registry) and the liveness check
// (liveness). Its methods are safe for concurrent use.
type Revision struct {
	service  string
	name     string // the revision's name: K_REVISION
	runner   runner.Runner
	log      *slog.Logger
	m        *series
	proxy    *forward.Proxy
	wg       sync.WaitGroup // the instance goroutines
	started  chan struct{}  // closed once run has begun
	finished chan struct{}  // closed once run has returned

	mu          sync.Mutex
	eng         *autoscale.Engine
	insts       map[autoscale.InstanceID]*instance
	waiters     map[autoscale.RequestID]*waiter
	nextInst    int // for instance names
	lastRec     autoscale.Recommendation
	ctx         context.Context  // set by run
	retiring    bool             // no new request is routed here
	retireBy    time.Time        // stop the instances by then even if busy
	lim         Limits           // grace, request timeout, max pending
	rejected    uint64           // requests answered 429, for the admin listing
	scales      []ScaleEvent     // the last scale decisions, oldest first
	cfg         autoscale.Config // as configured; the engine's differs by the share (runner.Sharer)
	floor       int              // min instances while a larger share waits for them (SetFloor)
	becameReady bool             // an instance of it has been ready: it can serve
	starts
	capacityShare
	registry
	liveness
}

// New makes a revision; Run runs it. The error wraps
// autoscale.ErrInvalidConfig when o.Config cannot be used, and
// ErrInvalidLiveness when o.Liveness cannot.
func New(o Options) (*Revision, error) {
	if o.Liveness != nil {
		if err := o.Liveness.Validate(); err != nil {
			return nil, fmt.Errorf("service %s: %w: %w", o.Service, ErrInvalidLiveness, err)
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := o.Metrics
	if m == nil {
		m = NewMetrics(nil)
	}
	rv := &Revision{
		service:  o.Service,
		name:     o.Name,
		runner:   o.Runner,
		lim:      o.Limits.WithDefaults(),
		log:      log.With("service", o.Service, "revision", o.Name),
		m:        m.of(o.Service, o.Name),
		cfg:      o.Config,
		started:  make(chan struct{}),
		finished: make(chan struct{}),
		insts:    map[autoscale.InstanceID]*instance{},
		waiters:  map[autoscale.RequestID]*waiter{},
	}
	rv.sharers = 1
	rv.reg = o.Registrar
	rv.regWake = make(chan struct{}, 1)
	rv.gpus = runnerGPUs(o.Runner)
	rv.overMaxGrace = o.OverMaxGrace
	if rv.overMaxGrace <= 0 {
		rv.overMaxGrace = MaxOverMaxGrace
	}
	if o.Liveness != nil {
		l := o.Liveness.WithDefaults()
		rv.live, rv.probes = &l, newProbeClient()
	}
	eng, err := autoscale.New(rv.engineConfig())
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", o.Service, err)
	}
	rv.eng = eng
	rv.proxy = forward.New(forward.Options{Service: o.Service, Logger: rv.log, MaxConcurrency: o.Config.WithDefaults().MaxConcurrency})
	return rv, nil
}

// Name is the revision's name (K_REVISION).
func (rv *Revision) Name() string { return rv.name }

// Service is its service's name (K_SERVICE).
func (rv *Revision) Service() string { return rv.service }

// Runner is what starts its instances.
func (rv *Revision) Runner() runner.Runner { return rv.runner }

// Done is closed once Run has returned: the revision was retired and has
// stopped its instances, or Run's context ended.
func (rv *Revision) Done() <-chan struct{} { return rv.finished }

// Run drives the revision until ctx ends, or until it is retired and its
// requests have finished; then it stops every instance and returns once
// they have exited. It may be called once.
func (rv *Revision) Run(ctx context.Context) error {
	defer close(rv.finished)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rv.mu.Lock()
	rv.ctx = ctx
	rv.mu.Unlock()
	if rv.reg != nil {
		regDone, regExited := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(regExited)
			rv.registrations(ctx, regDone)
		}()
		defer func() { close(regDone); <-regExited }() // after every instance is gone
	}
	close(rv.started)
	if c, ok := rv.runner.(io.Closer); ok {
		// What the runner kept for later starts (a warm spare) goes
		// with the revision, before Run returns.
		defer func() {
			if err := c.Close(); err != nil {
				rv.log.Warn("closing the revision's runner", "err", err)
			}
		}()
	}

	// Instances below min instances start at once, not a second later.
	rv.tick(time.Now())
	// With none to start, the runner may get ready for the first request
	// (starting it alongside an instance would only slow that start).
	if w, ok := rv.runner.(runner.Warmer); ok {
		rv.mu.Lock()
		idle := len(rv.insts) == 0
		rv.mu.Unlock()
		if idle {
			w.Warm(ctx, rv.service)
		}
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rv.wg.Wait()
			return nil
		case now := <-t.C:
			rv.tick(now)
			if rv.drained(now) {
				cancel()
				rv.wg.Wait()
				rv.log.Info("revision retired")
				return nil
			}
		}
	}
}

// Retire stops routing new requests to the revision; Run stops its
// instances once the requests it has finish, or at by.
func (rv *Revision) Retire(by time.Time) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if !rv.retiring {
		rv.retiring, rv.retireBy = true, by
		for _, in := range rv.insts {
			rv.announce(in, false)
		}
		rv.replaced() // a retiring revision replaces no unhealthy instance
	}
}

// drained reports whether a retired revision may stop its instances.
func (rv *Revision) drained(now time.Time) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if !rv.retiring {
		return false
	}
	st := rv.eng.Stats()
	return (st.InFlight+st.Pending == 0 && !rv.unhealthyBusy()) || now.After(rv.retireBy)
}

// ReadyCount is the number of ready instances.
func (rv *Revision) ReadyCount() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.eng.Stats().Ready
}

// SetConfig applies new targets, bounds and limits to the running
// engine; no instance is restarted. The error wraps
// autoscale.ErrInvalidConfig, and nothing changed then.
func (rv *Revision) SetConfig(cfg autoscale.Config, lim Limits) error {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	prev := rv.cfg
	rv.cfg = cfg
	if err := rv.eng.SetConfig(rv.engineConfig()); err != nil {
		rv.cfg = prev
		return fmt.Errorf("service %s: %w", rv.service, err)
	}
	rv.lim = lim.WithDefaults()
	return nil
}

// apply acts on engine events; rv.mu is held. Nothing here blocks.
func (rv *Revision) apply(now time.Time, ev autoscale.Events) {
	for _, id := range ev.Started {
		rv.launch(id)
	}
	for _, id := range ev.Draining {
		if in := rv.insts[id]; in != nil {
			rv.announce(in, false)
		}
	}
	for _, id := range ev.Stopped {
		if in := rv.insts[id]; in != nil {
			rv.announce(in, false)
			in.stopOnce.Do(func() { close(in.stop) })
		}
	}
	for _, d := range ev.Dispatched {
		w := rv.waiters[d.Request]
		in := rv.insts[d.Instance]
		if w == nil || in == nil {
			continue
		}
		in.begin(now)
		w.inst = in
		delete(rv.waiters, d.Request)
		close(w.ch)
	}
	for _, id := range ev.Rejected {
		if w := rv.waiters[id]; w != nil {
			w.rejected = true
			delete(rv.waiters, id)
			close(w.ch)
			rv.m.rejected.Inc()
			rv.rejected++
		}
	}
}

// stopGrace is the current grace period between SIGTERM and the kill.
func (rv *Revision) stopGrace() time.Duration {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.lim.StopGrace
}

// engineConfig is the engine's config: the configured one, with its
// minimum raised to the warm-up floor or for an unhealthy instance's
// replacement, the runner's GPUs (runner.GPURunner), and
// its maximum concurrency shared (shareOf, or the runner's share of it:
// LoadSharer, whose policy it then takes); rv.mu is held.
func (rv *Revision) engineConfig() autoscale.Config {
	cfg := rv.cfg
	cfg.MinInstances = max(cfg.MinInstances, min(max(rv.floor, rv.replace), maxInstances(cfg)))
	if rv.gpus > cfg.GPUs {
		cfg.GPUs = rv.gpus
		cfg.IdleTimeout = min(cfg.IdleTimeout, autoscale.DefaultGPUIdleTimeout) // 0 stays the default: 10 minutes with a GPU
	}
	full := cfg
	cfg = shareOf(cfg, rv.sharers)
	ls, ok := rv.runner.(runner.LoadSharer)
	if !ok {
		return cfg
	}
	if rv.share > 0 {
		cfg.MaxConcurrency = rv.share
	}
	local := cfg.Policy
	if local == nil {
		local = autoscale.NewCloudRun(cfg)
	}
	cfg.Policy = ls.SharedPolicy(rv.service+"/"+rv.name, full, cfg.MaxConcurrency, local)
	return cfg
}

// maxInstances is c's max instances, the default when it sets none.
func maxInstances(c autoscale.Config) int { return c.WithDefaults().MaxInstances }
