package pool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/forward"
)

// DefaultStopGrace is how long a stopped instance has between SIGTERM and
// the kill when a service sets none: 10 s, as Cloud Run.
const DefaultStopGrace = 10 * time.Second

// revision is one service revision: one engine, its instances and its
// waiting requests, driven by one loop (run). Every field below mu is
// guarded by it; no I/O happens while it is held.
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

	mu            sync.Mutex
	eng           *autoscale.Engine
	insts         map[autoscale.InstanceID]*instance
	waiters       map[autoscale.RequestID]*waiter
	nextInst      int // for instance names
	lastRec       autoscale.Recommendation
	failures      int             // instance exits in a row without a healthy run
	lastFailure   time.Time       // when the last of them exited: the backoff counts from it
	ctx           context.Context // set by run
	retiring      bool            // no new request is routed here
	retireBy      time.Time       // stop the instances by then even if busy
	lim           limits          // grace, request timeout, max pending
	lastStart     time.Time       // when the last instance was launched
	reg           Registrar       // nil: no registry; set before run
	regQ          []regEvent
	regWake       chan struct{}
	rejected      uint64           // requests answered 429, for the admin listing
	startErr      string           // why the last start failed; "" once an instance is ready
	startErrUntil time.Time        // requests get 503 at once until then (the replacement's backoff)
	scales        []ScaleEvent     // the last scale decisions, oldest first
	cfg           autoscale.Config // as configured; the engine's differs by the share (Sharer)
	sharers       int              // replicas sharing each instance, as last applied
	share         int              // this replica's max concurrency per instance (LoadSharer); 0: by sharers
	gpus          int              // GPUs per instance the runner reports (GPURunner), as last applied
	floor         int              // min instances while a larger share waits for them (setFloor)
	replace       int              // min instances until an unhealthy instance's replacement has started
	live          *Liveness        // the liveness check, defaults applied; nil: none. Set before run
	probes        *http.Client     // the liveness probes' client; nil without a check
	overMaxGrace  time.Duration    // bounds an unhealthy instance's drain (MaxOverMaxGrace)
	becameReady   bool             // an instance of it has been ready: it can serve
	deploying     bool             // its rollout waits for its first instances (rollout)
	failed        string           // why its last rollout failed (no instance ready in time); "" if none did
	spec          ServiceSpec      // what it was made from, to make it again (keptRevision)
	created       time.Time        // when it was first made (keptRevision)
}

// waiter is one pending request. The engine's decision is written under
// revision.mu before ch is closed, and read after.
type waiter struct {
	ch       chan struct{}
	inst     *instance // the instance it was dispatched to
	rejected bool
	failed   string // why it is answered 503: the start it waited for failed
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
		sharers:  1,
		started:  make(chan struct{}),
		finished: make(chan struct{}),
		insts:    map[autoscale.InstanceID]*instance{},
		waiters:  map[autoscale.RequestID]*waiter{},
		regWake:  make(chan struct{}, 1),
	}
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

// shareOf is cfg with the maximum concurrency of one replica among n
// sharing each instance (see Sharer): at least one request.
func shareOf(cfg autoscale.Config, n int) autoscale.Config {
	if n <= 1 {
		return cfg
	}
	cfg.MaxConcurrency = max(1, cfg.WithDefaults().MaxConcurrency/n)
	return cfg
}

// runnerGPUs is the GPUs per instance runner reports (GPURunner), in
// [0, autoscale.MaxGPUs]; 0 when it reports none.
func runnerGPUs(runner Runner) int {
	if g, ok := runner.(GPURunner); ok {
		return min(max(g.GPUs(), 0), autoscale.MaxGPUs)
	}
	return 0
}

// reshare applies the runner's current number of sharers, this replica's
// share (LoadSharer) and the GPUs it reports (GPURunner) to the engine;
// rv.mu is held.
func (rv *revision) reshare() {
	gpus := runnerGPUs(rv.runner)
	s, shared := rv.runner.(Sharer)
	n, share := 1, 0
	if shared {
		n = max(1, s.Sharers())
		if ls, ok := s.(LoadSharer); ok {
			mc := rv.cfg.WithDefaults().MaxConcurrency
			share = min(max(ls.Share(mc), 1), mc)
		}
	}
	if n == rv.sharers && share == rv.share && gpus == rv.gpus {
		return
	}
	prevN, prevShare, prevGPUs := rv.sharers, rv.share, rv.gpus
	rv.sharers, rv.share, rv.gpus = n, share, gpus
	if err := rv.eng.SetConfigShared(rv.engineConfig()); err != nil {
		rv.sharers, rv.share, rv.gpus = prevN, prevShare, prevGPUs
		rv.log.Warn("cannot apply the capacity share", "sharers", n, "share", share, "gpus", gpus, "error", err)
		return
	}
	switch {
	case gpus != prevGPUs && gpus > 0:
		rv.log.Info("the runner's instances have GPUs: idle instances are kept 10 minutes at most", "gpus", gpus,
			"idle_timeout", rv.eng.Config().IdleTimeout)
	case gpus != prevGPUs:
		rv.log.Info("the runner's instances no longer have GPUs", "idle_timeout", rv.eng.Config().IdleTimeout)
	}
	if n == prevN {
		// A share that follows the replicas' load changes often: only
		// a change of the replicas is worth a line.
		rv.log.Debug("capacity share", "sharers", n, "max_concurrency_here", rv.eng.Config().MaxConcurrency)
		return
	}
	rv.log.Info("instances shared with other tollgate replicas", "sharers", n, "from", prevN,
		"max_concurrency_here", rv.eng.Config().MaxConcurrency)
	if mc := rv.cfg.WithDefaults().MaxConcurrency; mc < n {
		rv.log.Warn("max_concurrency is below the number of tollgate replicas: each replica sends an instance one request at once, so an instance may get up to one per replica",
			"max_concurrency", mc, "replicas", n)
	}
	rv.m.sharers.Set(float64(n))
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

// ServeHTTP routes, waits and proxies one request. The slot the engine
// gives it is released by the deferred finish on every path. The
// service's request timeout bounds it all, the pending wait included: it
// replaces the server's read and write deadlines for this request (a
// long upload, download or computation is the service's to bound, as on
// Cloud Run), and ends the wait and the proxied call when it passes.
func (rv *revision) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select { // a request may come in before the pool runs
	case <-rv.started:
	case <-r.Context().Done():
		return
	}
	start := time.Now()
	rv.mu.Lock()
	// A retiring revision still takes the odd request that found it just
	// before traffic moved: it drains before its instances stop.
	if rv.ctx == nil || rv.ctx.Err() != nil {
		rv.mu.Unlock()
		http.Error(w, "service "+rv.service+" is not running", http.StatusServiceUnavailable)
		return
	}
	lim := rv.lim
	st := rv.eng.Stats()
	if st.Ready == 0 && rv.startErr != "" && start.Before(rv.startErrUntil) {
		// The last start failed and its replacement is held back by the
		// crash-loop backoff: waiting would only end in the same failure.
		why := rv.startErr
		rv.mu.Unlock()
		rv.m.refused.WithLabelValues("start_failed").Inc()
		http.Error(w, "service "+rv.service+": "+why, http.StatusServiceUnavailable)
		return
	}
	if st.Pending >= lim.maxPending {
		wait := rv.eng.PendingWait()
		rv.rejected++
		rv.mu.Unlock()
		rv.m.refused.WithLabelValues("pending_full").Inc()
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfter(wait), 10))
		http.Error(w, fmt.Sprintf("service %s: %d requests already waiting for an instance (max_pending); retry later", rv.service, lim.maxPending), http.StatusTooManyRequests)
		return
	}
	res := rv.eng.Route(start)
	var in *instance
	var wt *waiter
	if res.Outcome == autoscale.Served {
		in = rv.insts[res.Instance]
		in.begin(start)
	} else {
		wt = &waiter{ch: make(chan struct{})}
		rv.waiters[res.Request] = wt
	}
	if res.Started {
		rv.launch(res.Instance)
	}
	rv.mu.Unlock()
	defer func() { rv.finish(res.Request, in, wt) }()

	deadline := start.Add(lim.requestTimeout)
	rc := http.NewResponseController(w)
	// Errors mean the writer cannot take deadlines (a test recorder):
	// then the server's own, if any, stay. The write deadline leaves a
	// moment past the request timeout to write its 504.
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline.Add(requestTimeoutGrace))
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()

	if wt != nil {
		// The engine decides whether to start another instance or reject
		// (its pending wait); the request timeout bounds how long the
		// request waits for an instance on its way.
		select {
		case <-wt.ch:
		case <-ctx.Done():
			rv.m.pendingWait.Observe(time.Since(start).Seconds())
			if r.Context().Err() != nil && time.Now().Before(deadline) {
				return // the client went away: finish drops it from the queue
			}
			// The read deadline at the request timeout also cut the
			// server's watch on the client's connection, which cancels
			// r's context: that is not the client leaving (without an
			// answer here net/http sent an empty 200). The 504 closes
			// the connection, as the proxy's does.
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			http.Error(w, fmt.Sprintf("service %s: no instance became available within the request timeout (%v)", rv.service, lim.requestTimeout), http.StatusGatewayTimeout)
			return
		}
		rv.m.pendingWait.Observe(time.Since(start).Seconds())
		if wt.failed != "" {
			http.Error(w, "service "+rv.service+": "+wt.failed, http.StatusServiceUnavailable)
			return
		}
		if wt.rejected {
			// Every slot stayed busy at max instances for the whole
			// pending wait: a retry sooner would most likely wait as long
			// again, so ask for that long (whole seconds, rounded up).
			w.Header().Set("Retry-After", strconv.FormatInt(retryAfter(res.Deadline.Sub(start)), 10))
			http.Error(w, "service "+rv.service+": every instance is busy at max instances; retry later", http.StatusTooManyRequests)
			return
		}
		in = wt.inst
	}
	rv.proxy.Serve(w, r.WithContext(ctx), in, r.Context())
}

// requestTimeoutGrace is how long past the request timeout the answer
// saying so may take to write.
const requestTimeoutGrace = 5 * time.Second

// retryAfter is the Retry-After of a 429 for a request that waited
// pending for wait: wait in whole seconds, rounded up, at least 1.
func retryAfter(wait time.Duration) int64 {
	return max(1, int64((wait+time.Second-1)/time.Second))
}

// finish tells the engine request id is done (or abandoned while pending)
// and acts on the slots it frees. in is the instance it ran on, if known;
// a waiter dispatched just as its client left names its own.
func (rv *revision) finish(id autoscale.RequestID, in *instance, wt *waiter) {
	now := time.Now()
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if in == nil && wt != nil {
		in = wt.inst
	}
	delete(rv.waiters, id)
	ev, err := rv.eng.RequestDone(now, id)
	if err != nil {
		// Rejected, or failed with its instance: the engine already
		// forgot it. One on an unhealthy instance, which the engine
		// forgot too, has finished there: the instance stops once none is
		// left.
		if in != nil && in.unhealthy {
			in.end(now)
			in.noteIdle()
		}
		return
	}
	if in != nil {
		in.end(now)
	}
	rv.apply(now, ev)
}

// stopGrace is the current grace period between SIGTERM and the kill.
func (rv *revision) stopGrace() time.Duration {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.lim.grace
}
