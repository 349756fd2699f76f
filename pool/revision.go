package pool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/forward"
)

// DefaultStopGrace is how long a stopped instance has between SIGTERM and
// the kill when a service sets none: 10 s, as Cloud Run.
const DefaultStopGrace = 10 * time.Second

// revision is one service revision: one engine, its instances and its
// waiting requests, driven by one loop (run). Every field below mu, and
// in the parts it embeds, is guarded by it; no I/O happens while it is
// held. The parts hold one idea each: the instances' starts and their
// crash-loop backoff (starts), the capacity shared with other replicas
// (capacityShare), the registry (registry), the liveness check
// (liveness), and its place in a rollout (rolloutState).
type revision struct {
	service  string
	name     string // the revision's name: K_REVISION
	where    string // what its runner runs, when bound (BoundRevision.Where); else ""
	runner   Runner
	log      *slog.Logger
	m        *serviceMetrics
	proxy    *forward.Proxy
	wg       sync.WaitGroup // the instance goroutines
	started  chan struct{}  // closed once run has begun
	finished chan struct{}  // closed once run has returned
	spec     ServiceSpec    // what it was made from, to make it again (keptRevision)
	created  time.Time      // when it was first made (keptRevision)

	mu       sync.Mutex
	eng      *autoscale.Engine
	insts    map[autoscale.InstanceID]*instance
	waiters  map[autoscale.RequestID]*waiter
	nextInst int // for instance names
	lastRec  autoscale.Recommendation
	ctx      context.Context  // set by run
	retiring bool             // no new request is routed here
	retireBy time.Time        // stop the instances by then even if busy
	lim      limits           // grace, request timeout, max pending
	rejected uint64           // requests answered 429, for the admin listing
	scales   []ScaleEvent     // the last scale decisions, oldest first
	cfg      autoscale.Config // as configured; the engine's differs by the share (Sharer)
	starts
	capacityShare
	registry
	liveness
	rolloutState
}

func newRevision(service, name string, cfg autoscale.Config, runner Runner, lim limits, log *slog.Logger, m *serviceMetrics) (*revision, error) {
	rv := &revision{
		service:  service,
		name:     name,
		runner:   runner,
		lim:      lim,
		log:      log.With("service", service, "revision", name),
		m:        m,
		cfg:      cfg,
		started:  make(chan struct{}),
		finished: make(chan struct{}),
		insts:    map[autoscale.InstanceID]*instance{},
		waiters:  map[autoscale.RequestID]*waiter{},
	}
	rv.sharers = 1
	rv.regWake = make(chan struct{}, 1)
	rv.gpus = runnerGPUs(runner)
	eng, err := autoscale.New(rv.engineConfig())
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", service, err)
	}
	rv.eng = eng
	rv.proxy = forward.New(forward.Options{Service: service, Logger: rv.log, MaxConcurrency: cfg.WithDefaults().MaxConcurrency})
	return rv, nil
}

// run drives the revision until ctx ends, or until it is retired and its
// requests have finished; then it stops every instance and returns once
// they have exited.
func (rv *revision) run(ctx context.Context) error {
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
	if w, ok := rv.runner.(Warmer); ok {
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

// retire stops routing new requests to the revision; run stops its
// instances once the requests it has finish, or at by.
func (rv *revision) retire(by time.Time) {
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
func (rv *revision) drained(now time.Time) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if !rv.retiring {
		return false
	}
	st := rv.eng.Stats()
	return (st.InFlight+st.Pending == 0 && !rv.unhealthyBusy()) || now.After(rv.retireBy)
}

// readyCount is the number of ready instances.
func (rv *revision) readyCount() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.eng.Stats().Ready
}

// setConfig applies new targets, bounds and limits to the running engine.
func (rv *revision) setConfig(cfg autoscale.Config, lim limits) error {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	prev := rv.cfg
	rv.cfg = cfg
	if err := rv.eng.SetConfig(rv.engineConfig()); err != nil {
		rv.cfg = prev
		return fmt.Errorf("service %s: %w", rv.service, err)
	}
	rv.lim = lim
	return nil
}

// apply acts on engine events; rv.mu is held. Nothing here blocks.
func (rv *revision) apply(now time.Time, ev autoscale.Events) {
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
func (rv *revision) stopGrace() time.Duration {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.lim.grace
}

// engineConfig is the engine's config: the configured one, with its
// minimum raised to the warm-up floor or for an unhealthy instance's
// replacement, the runner's GPUs (GPURunner), and
// its maximum concurrency shared (shareOf, or the runner's share of it:
// LoadSharer, whose policy it then takes); rv.mu is held.
func (rv *revision) engineConfig() autoscale.Config {
	cfg := rv.cfg
	cfg.MinInstances = max(cfg.MinInstances, min(max(rv.floor, rv.replace), maxInstances(cfg)))
	if rv.gpus > cfg.GPUs {
		cfg.GPUs = rv.gpus
		cfg.IdleTimeout = min(cfg.IdleTimeout, autoscale.DefaultGPUIdleTimeout) // 0 stays the default: 10 minutes with a GPU
	}
	full := cfg
	cfg = shareOf(cfg, rv.sharers)
	ls, ok := rv.runner.(LoadSharer)
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
