package revision

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/runner"
)

// Crash-loop backoff: after the second failure in a row each replacement
// waits backoffBase, doubling per failure up to backoffCap. An instance
// that stays ready for backoffReset ends the run of failures.
const (
	backoffBase  = time.Second
	backoffCap   = time.Minute
	backoffReset = 30 * time.Second
)

// backoff is the wait before starting a replacement after failures exits
// in a row: none for the first, then 1 s, 2 s, 4 s … up to 1 min.
func backoff(failures int) time.Duration {
	if failures < 2 {
		return 0
	}
	d := backoffBase
	for i := 2; i < failures && d < backoffCap; i++ {
		d *= 2
	}
	return min(d, backoffCap)
}

// remainingBackoff is how long an instance launched since the last of
// failures exits in a row still waits: the backoff counts from that
// failure, not from the launch. An instance launched by a request that
// came once the failed start's 503s ended (ServeHTTP refuses requests for
// the same backoff) does not wait it a second time.
func remainingBackoff(failures int, since time.Duration) time.Duration {
	return max(backoff(failures)-since, 0)
}

// instance is the pool's side of one engine instance. Fields below the
// line are guarded by rv.mu.
type instance struct {
	id       autoscale.InstanceID
	name     string
	stop     chan struct{} // closed when the engine stops it
	stopOnce sync.Once
	gone     chan struct{} // closed once the engine was told it exited on its own (revision.gone)
	goneOnce sync.Once
	launched time.Time
	killed   atomic.Pointer[string] // why the pool stopped it with requests in flight

	// Set before the instance is reported ready, never changed after.
	run  runner.Instance
	url  *url.URL
	port int

	// ---
	inFlight    int
	lastChange  time.Time
	area        float64 // in-flight × nanoseconds since periodStart
	periodStart time.Time
	cpuLast     time.Duration
	cpuAt       time.Time
	cpuOK       bool
	readyAt     time.Time
	conc, cpu   float64       // last second's averages, for the admin endpoint
	registered  bool          // announced to the Registrar as taking requests
	unhealthy   bool          // failed its liveness check: the engine forgot it
	idle        chan struct{} // an unhealthy one's: closed once nothing runs on it
}

// begin and end count a request starting and finishing on the instance,
// integrating in-flight over time; rv.mu is held.
func (in *instance) begin(now time.Time) { in.advance(now); in.inFlight++ }
func (in *instance) end(now time.Time)   { in.advance(now); in.inFlight-- }

func (in *instance) advance(now time.Time) {
	if in.lastChange.IsZero() {
		in.lastChange, in.periodStart = now, now
	}
	if d := now.Sub(in.lastChange); d > 0 {
		in.area += float64(in.inFlight) * float64(d)
		in.lastChange = now
	}
}

// concurrency returns the time-weighted average of in-flight requests
// since the previous call (or since it became ready) and starts a new
// period at now; rv.mu is held.
func (in *instance) concurrency(now time.Time) float64 {
	in.advance(now)
	span := now.Sub(in.periodStart)
	avg := float64(in.inFlight)
	if span > 0 {
		avg = in.area / float64(span)
	}
	in.area, in.periodStart = 0, now
	return avg
}

// exitedErr reports whether the instance has exited, and why: the exit
// status, or why the pool stopped it with requests in flight.
func (in *instance) exitedErr() (bool, error) {
	if in.run == nil {
		return false, nil
	}
	select {
	case <-in.run.Done():
		err := in.run.Err()
		if why := in.killed.Load(); err == nil && why != nil {
			err = errors.New(*why)
		}
		return true, err
	default:
		return false, nil
	}
}

// Name names the instance in logs (forward.Target).
func (in *instance) Name() string { return in.name }

// URL is where requests to the instance go (forward.Target); set before
// it is reported ready.
func (in *instance) URL() *url.URL { return in.url }

// AwaitExit is asked by the proxy after a dropped connection, which
// usually means the instance died; its exit is noticed a moment later
// (forward.Target). It waits briefly for it, so the answer says what
// happened, and, when it exited on its own, until the engine was told
// (revision.gone): the request still runs there then, so the crash's log
// line counts it among the requests that failed with it.
func (in *instance) AwaitExit() (bool, error) {
	if in.run == nil {
		return false, nil
	}
	t := time.NewTimer(time.Second)
	select {
	case <-in.gone:
	case <-in.run.Done():
		if in.killed.Load() == nil {
			select {
			case <-in.gone:
			case <-t.C:
			}
		}
	case <-t.C:
	}
	t.Stop()
	return in.exitedErr()
}

// setAddr records where requests to the instance go; rv.mu is held.
func (in *instance) setAddr(addr string) {
	in.url = &url.URL{Scheme: "http", Host: addr}
	in.port = 0
	if _, p, err := net.SplitHostPort(addr); err == nil {
		in.port, _ = strconv.Atoi(p)
	}
}

// launch starts the goroutine of engine instance id; rv.mu is held
// and run has started (ServeHTTP and apply run only then).
func (rv *Revision) launch(id autoscale.InstanceID) {
	rv.nextInst++
	in := &instance{
		id:       id,
		name:     rv.name + "-" + strconv.Itoa(rv.nextInst),
		stop:     make(chan struct{}),
		gone:     make(chan struct{}),
		launched: time.Now(),
	}
	rv.insts[id] = in
	failures := rv.failures
	wait := backoff(failures)
	rv.m.backoff.Set(wait.Seconds())
	delay := remainingBackoff(failures, time.Since(rv.lastFailure))
	ctx := rv.ctx
	rv.wg.Add(1)
	go func() {
		defer rv.wg.Done()
		if delay > 0 { // logged here, not under rv.mu
			rv.log.Warn("instance failing repeatedly; delaying its replacement", "instance", in.name, "failures", failures, "backoff", wait, "delay", delay)
		}
		rv.runInstance(ctx, in, delay)
	}()
}

// runInstance starts instance in, reports it ready, and stops it when the
// engine says so or ctx ends; an exit of its own is reported to the engine.
func (rv *Revision) runInstance(ctx context.Context, in *instance, delay time.Duration) {
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			rv.gone(in, nil, ctx.Err())
			return
		}
	}
	start := time.Now()
	run, err := rv.runner.Start(ctx, runner.InstanceSpec{Service: rv.service, Revision: rv.name, ID: in.name})
	if err != nil {
		rv.gone(in, nil, fmt.Errorf("start: %w", err))
		return
	}
	rv.mu.Lock()
	in.run = run
	in.setAddr(run.Addr())
	rv.mu.Unlock()

	if err := run.Ready(ctx); err != nil {
		run.Stop(rv.stopGrace())
		rv.gone(in, run, fmt.Errorf("readiness: %w", err))
		return
	}
	now := time.Now()
	coldStart := now.Sub(start)
	// Observed before the engine may dispatch to the instance, so that
	// whoever got an answer from it also sees its cold start counted.
	rv.m.coldStart.Observe(coldStart.Seconds())
	rv.mu.Lock()
	in.setAddr(run.Addr()) // a pod's address is known only once it is ready
	in.readyAt = now
	in.lastChange, in.periodStart = now, now
	in.cpuLast, in.cpuOK = run.CPUTime()
	in.cpuAt = now
	rv.startErr = ""
	rv.becameReady = true
	ev, err := rv.eng.InstanceReady(now, in.id)
	if err == nil {
		if !rv.retiring {
			rv.announce(in, true)
		}
		rv.apply(now, ev)
	}
	rv.mu.Unlock()
	if err != nil { // cannot happen: only this goroutine reports it ready
		rv.log.Error("engine refused a ready instance", "instance", in.name, "error", err)
	}
	// The pool owns the lifecycle lines at Info (ready, stopped, exited on
	// its own): it knows the cold start, the address and the reason. A
	// Runner logs its own view at Debug at most (package process does).
	rv.log.Info("instance ready", "instance", in.name, "pid", run.PID(), "addr", run.Addr(), "cold_start", coldStart.Round(time.Millisecond))

	rv.watch(ctx, in, run)
}

// stopInstance stops an instance the engine (or shutdown) let go.
func (rv *Revision) stopInstance(in *instance, run runner.Instance, why string) {
	start := time.Now()
	rv.mu.Lock()
	if in.inFlight > 0 && in.killed.Load() == nil {
		// Its requests get 502 saying so (the proxy's exitedErr).
		msg := "stopped with requests in flight: " + why
		in.killed.Store(&msg)
	}
	rv.mu.Unlock()
	err := run.Stop(rv.stopGrace())
	rv.proxy.CloseIdleConnections()
	rv.mu.Lock()
	rv.announce(in, false)
	delete(rv.insts, in.id)
	rv.mu.Unlock()
	rv.m.forget(in.name)
	if err != nil {
		rv.log.Warn("instance stopped with an error", "instance", in.name, "pid", run.PID(), "reason", why, "error", err, "took", time.Since(start).Round(time.Millisecond))
		return
	}
	rv.log.Info("instance stopped", "instance", in.name, "pid", run.PID(), "reason", why, "took", time.Since(start).Round(time.Millisecond))
}

// startFailed answers the requests waiting for an instance when a start
// failed and none is ready: 503 at once with a short reason (the log has
// the whole story), rather than a wait for a replacement that would most
// likely fail the same way. Until the crash-loop backoff has passed, new
// requests get the same answer at once (ServeHTTP). It is called before
// the engine learns of the exit, and withdraws the answered requests from
// the engine first: with none pending, the engine starts no replacement
// on demand for them (a crash-looping service started one a second after
// its only request had been answered 503); a request, or min instances,
// starts the next one. rv.mu is held.
func (rv *Revision) startFailed(now time.Time, in *instance, run runner.Instance, why error) {
	msg := "instance not ready: " + lastPart(why)
	if run != nil {
		if exited, err := in.exitedErr(); exited && err != nil {
			msg = "instance exited before ready: " + lastPart(err)
		} else if exited {
			msg = "instance exited before ready"
		}
	}
	rv.startErr, rv.startErrUntil = msg, now.Add(backoff(rv.failures))
	if rv.eng.Stats().Ready > 0 {
		return
	}
	for id, w := range rv.waiters {
		w.failed = msg
		delete(rv.waiters, id)
		close(w.ch)
		// Pending: withdrawn now; finish then finds it gone.
		if ev, err := rv.eng.RequestDone(now, id); err == nil {
			rv.apply(now, ev)
		}
	}
}

// lastPart is the innermost cause of a wrapped error's text: what follows
// its last ": " ("exit status 2", "connection refused").
func lastPart(err error) string {
	if err == nil {
		return "unknown"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		return s[i+2:]
	}
	return s
}

// gone handles an instance that exited, or never got ready, on its own:
// the engine forgets it (failing the requests that ran on it, which the
// proxy answers 502) and places its pending requests elsewhere.
func (rv *Revision) gone(in *instance, run runner.Instance, why error) {
	now := time.Now()
	rv.mu.Lock()
	rv.announce(in, false)
	delete(rv.insts, in.id)
	shutdown := rv.ctx.Err() != nil || rv.retiring
	quiet := shutdown && (errors.Is(why, context.Canceled) || run == nil)
	reason := "crashed"
	switch {
	case errors.Is(why, runner.ErrOOMKilled):
		reason = "oom_killed"
	case in.readyAt.IsZero():
		reason = "start_failed"
	}
	if !quiet {
		// Counted before the engine forgets the instance, so that
		// whoever sees it gone from Status also sees it counted.
		rv.m.exits.WithLabelValues(reason).Inc()
	}
	// Counted before the engine places the pending requests, which may
	// launch the replacement: its backoff counts this failure.
	healthy := !in.readyAt.IsZero() && now.Sub(in.readyAt) >= backoffReset
	if !shutdown {
		if healthy {
			rv.failures = 1
		} else {
			rv.failures++
		}
		rv.lastFailure = now
	}
	// The requests answered for a failed start are withdrawn before the
	// engine places the pending ones: none gets a replacement started.
	if reason == "start_failed" && !shutdown {
		rv.startFailed(now, in, run, why)
	}
	ev, err := rv.eng.InstanceExited(now, in.id)
	if err == nil {
		rv.apply(now, ev)
	}
	failures := rv.failures
	failed := len(ev.Failed)
	rv.mu.Unlock()
	// The proxy answers a request that failed on it only now (see its
	// ErrorHandler), so the engine counted it in ev.Failed.
	in.goneOnce.Do(func() {
		if in.gone != nil {
			close(in.gone)
		}
	})
	rv.m.forget(in.name)
	if quiet {
		return
	}
	pid := 0
	if run != nil {
		pid = run.PID()
	}
	rv.log.Warn("instance exited on its own", "instance", in.name, "pid", pid, "reason", reason, "error", why,
		"requests_failed", failed, "failures_in_a_row", failures, "next_backoff", backoff(failures))
}

// starts is how a revision's instances have been starting: the
// crash-loop backoff counts from its failures (instance.go).
type starts struct {
	failures      int       // instance exits in a row without a healthy run
	lastFailure   time.Time // when the last of them exited: the backoff counts from it
	lastStart     time.Time // when the last instance was launched
	startErr      string    // why the last start failed; "" once an instance is ready
	startErrUntil time.Time // requests get 503 at once until then (the replacement's backoff)
}
