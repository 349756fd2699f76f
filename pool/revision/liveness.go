package revision

// This file is the liveness check of ready instances: probes, an
// instance found unhealthy, its replacement (over max instances if need
// be) and its end once its requests have finished.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/runner"
)

// Liveness is an instance's liveness check, as Cloud Run's HTTP liveness
// probe: once the instance is ready, a GET of Path on its own address
// every Period, which must answer 200–399 within Timeout. FailureThreshold
// failures in a row make the instance unhealthy: it gets no new request,
// the engine forgets it so that a replacement starts (beyond max
// instances if need be, counted in tollgate_pool_instances_over_max with
// reason unhealthy), and it is stopped once its requests in flight have
// finished, or at the request timeout or MaxOverMaxGrace after it was
// found unhealthy, whichever comes first.
type Liveness struct {
	// Path is the HTTP path probed, such as /healthz; required, starting
	// with a slash.
	Path string
	// Period is the time between the end of one probe and the next;
	// 0 means DefaultLivenessPeriod.
	Period time.Duration
	// Timeout bounds one probe, at most Period; 0 means
	// DefaultLivenessTimeout (or Period when that is shorter).
	Timeout time.Duration
	// FailureThreshold is the failed probes in a row that make the
	// instance unhealthy; 0 means DefaultLivenessFailureThreshold.
	FailureThreshold int
	// InitialDelay is added before the first probe, which comes Period
	// after the instance became ready.
	InitialDelay time.Duration
}

// Cloud Run's liveness defaults (and the Kubernetes probe's), and the
// pool's bounds on a Liveness.
const (
	DefaultLivenessPeriod           = 10 * time.Second
	DefaultLivenessTimeout          = time.Second
	DefaultLivenessFailureThreshold = 3
	// MaxLivenessPeriod bounds Period, Timeout and InitialDelay.
	MaxLivenessPeriod = time.Hour
	// MaxLivenessFailureThreshold bounds FailureThreshold.
	MaxLivenessFailureThreshold = 1000
	// maxLivenessPath bounds Path's length.
	maxLivenessPath = 1024
	// maxProbeBody is how much of a probe's answer is read.
	maxProbeBody = 64 << 10
)

// WithDefaults returns l with its zero fields set to the defaults.
func (l Liveness) WithDefaults() Liveness {
	if l.Period == 0 {
		l.Period = DefaultLivenessPeriod
	}
	if l.Timeout == 0 {
		l.Timeout = min(DefaultLivenessTimeout, l.Period)
	}
	if l.FailureThreshold == 0 {
		l.FailureThreshold = DefaultLivenessFailureThreshold
	}
	return l
}

// ErrInvalidLiveness is wrapped by New's error for a liveness check
// Validate refuses.
var ErrInvalidLiveness = errors.New("invalid liveness check")

// Validate says what is wrong with l once its zero fields take the
// defaults (WithDefaults): a path that is not an HTTP path, or a field
// out of its bounds; nil when l can be used.
func (l Liveness) Validate() error {
	l = l.WithDefaults()
	switch {
	case !strings.HasPrefix(l.Path, "/") || len(l.Path) > maxLivenessPath || strings.ContainsAny(l.Path, " \t\r\n#"):
		return fmt.Errorf("liveness path %q is not an HTTP path such as /healthz (at most %d bytes)", l.Path, maxLivenessPath)
	case l.Period <= 0 || l.Period > MaxLivenessPeriod:
		return fmt.Errorf("liveness period %v not in (0, %v]", l.Period, MaxLivenessPeriod)
	case l.Timeout <= 0 || l.Timeout > l.Period:
		return fmt.Errorf("liveness timeout %v not in (0, period %v]", l.Timeout, l.Period)
	case l.FailureThreshold < 1 || l.FailureThreshold > MaxLivenessFailureThreshold:
		return fmt.Errorf("liveness failure threshold %d not in [1, %d]", l.FailureThreshold, MaxLivenessFailureThreshold)
	case l.InitialDelay < 0 || l.InitialDelay > MaxLivenessPeriod:
		return fmt.Errorf("liveness initial delay %v not in [0, %v]", l.InitialDelay, MaxLivenessPeriod)
	}
	return nil
}

// failureRun counts a liveness check's failures in a row.
type failureRun struct{ n int }

// note records one probe's outcome and reports whether the failures in a
// row have reached threshold.
func (f *failureRun) note(err error, threshold int) bool {
	if err == nil {
		f.n = 0
		return false
	}
	f.n++
	return f.n >= threshold
}

// unhealthyBound is when an instance found unhealthy at is stopped even
// with requests in flight: its requests, all begun before at, end within
// the request timeout, and MaxOverMaxGrace (grace) bounds it as Cloud
// Run's grace for instances over max.
func unhealthyBound(at time.Time, requestTimeout, grace time.Duration) time.Time {
	return at.Add(min(requestTimeout, grace))
}

// newProbeClient is the client of a revision's liveness probes: a new
// connection per probe (a kept one could hide a listener that no longer
// accepts), never through a proxy, no redirect followed (a 3xx passes).
func newProbeClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// probe runs one liveness probe of in: nil when it answered 200–399
// within the timeout.
func (rv *Revision) probe(ctx context.Context, in *instance, l Liveness) error {
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.url.Host+l.Path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", l.Path, err)
	}
	req.Header.Set("User-Agent", "tollgate-liveness")
	resp, err := rv.probes.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("GET %s: no answer within the %v timeout", l.Path, l.Timeout)
		}
		return fmt.Errorf("GET %s: %w", l.Path, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: status %d", l.Path, resp.StatusCode)
	}
	return nil
}

// watch waits for the end of the ready instance in: its own exit, the
// engine's stop or the pool's end. With a liveness check it probes the
// instance meanwhile, each probe in a goroutine joined before watch
// returns, and one found unhealthy is replaced and drained (unhealthy).
// Without one it only waits: no timer, no goroutine.
func (rv *Revision) watch(ctx context.Context, in *instance, run runner.Instance) {
	var (
		live    Liveness
		probeC  <-chan time.Time
		timer   *time.Timer
		results chan error
		probing bool
		fails   failureRun
	)
	// The probes' context: ended before the instance is stopped.
	pctx, cancel := ctx, context.CancelFunc(func() {})
	if rv.live != nil {
		pctx, cancel = context.WithCancel(ctx)
		live = *rv.live
		timer = time.NewTimer(live.InitialDelay + live.Period)
		defer timer.Stop()
		probeC = timer.C
		results = make(chan error, 1)
	}
	defer cancel()
	endProbe := func() {
		if probing {
			cancel()
			<-results
			probing = false
		}
	}
	for {
		select {
		case <-run.Done():
			endProbe()
			rv.gone(in, run, run.Err())
			return
		case <-in.stop:
			endProbe()
			rv.stopInstance(in, run, "scaled down")
			return
		case <-ctx.Done():
			endProbe()
			rv.stopInstance(in, run, "shutting down")
			return
		case <-probeC:
			probing = true
			go func() { results <- rv.probe(pctx, in, live) }()
		case err := <-results:
			probing = false
			if fails.note(err, live.FailureThreshold) {
				rv.unhealthy(ctx, in, run, err, fails.n)
				return
			}
			if err != nil {
				rv.log.Info("liveness probe failed", "instance", in.name, "error", err, "failures_in_a_row", fails.n, "failure_threshold", live.FailureThreshold)
			}
			timer.Reset(live.Period)
		}
	}
}

// OverMaxReasonUnhealthy labels unhealthy instances still finishing their
// requests beside their replacements beyond max instances: the reason
// of the exit counted in tollgate_pool_instance_exits_total, and of the
// instances over max the pool exports (tollgate_pool_instances_over_max,
// beside its own reason for a retired revision's).
const OverMaxReasonUnhealthy = "unhealthy"

// unhealthy lets go of instance in, which failed its liveness check
// (why, after failures probes in a row): the engine forgets it, so it
// gets no new request and its place is free; a replacement starts at the
// next tick (beyond max instances when the revision is at max), unless
// the engine was already draining it or the revision is retiring. The
// instance is stopped once its requests in flight have finished, or at
// its bound (unhealthyBound), when they get the proxy's 502 for an
// instance that exited while serving them.
func (rv *Revision) unhealthy(ctx context.Context, in *instance, run runner.Instance, why error, failures int) {
	now := time.Now()
	rv.mu.Lock()
	bound := unhealthyBound(now, rv.lim.RequestTimeout, rv.overMaxGrace)
	limit := maxInstances(rv.cfg)
	overMax := len(rv.insts) >= limit // the replacement comes beyond max
	in.unhealthy = true
	rv.announce(in, false)
	rv.m.exits.WithLabelValues(OverMaxReasonUnhealthy).Inc()
	if now.Sub(in.readyAt) >= backoffReset {
		rv.failures = 1
	} else {
		rv.failures++ // a replacement unhealthy at once backs off as a crash does
	}
	rv.lastFailure = now
	info, _ := rv.eng.Instance(in.id)
	st := rv.eng.Stats()
	live := st.Starting + st.Ready // in included, unless draining
	replace := info.State == autoscale.Ready && !rv.retiring && rv.ctx.Err() == nil
	if ev, err := rv.eng.InstanceExited(now, in.id); err == nil {
		rv.apply(now, ev)
	}
	if replace && live > rv.replace {
		rv.replace = live
		if err := rv.eng.SetConfigShared(rv.engineConfig()); err != nil {
			rv.log.Warn("cannot raise the minimum to replace an unhealthy instance", "instance", in.name, "error", err)
		}
	}
	inFlight := in.inFlight
	in.idle = make(chan struct{})
	in.noteIdle()
	rv.mu.Unlock()
	rv.log.Warn("instance unhealthy: it gets no new requests and is replaced; it stops once its requests in flight finish, or at its bound",
		"instance", in.name, "reason", OverMaxReasonUnhealthy, "error", why, "probe_failures", failures,
		"in_flight", inFlight, "replaced", replace, "over_max", replace && overMax, "max_instances", limit,
		"bound", bound.Sub(now).Round(time.Millisecond))

	t := time.NewTimer(time.Until(bound))
	defer t.Stop()
	reason := "unhealthy: its requests finished"
	select {
	case <-in.idle:
	case <-run.Done():
		reason = "unhealthy: exited while finishing its requests"
	case <-ctx.Done():
		reason = "shutting down"
	case <-t.C:
		rv.mu.Lock()
		left := in.inFlight
		rv.mu.Unlock()
		reason = fmt.Sprintf("unhealthy: its bound passed (%v after it was found unhealthy)", bound.Sub(now).Round(time.Millisecond))
		msg := "stopped at its bound, unhealthy for " + bound.Sub(now).Round(time.Millisecond).String()
		in.killed.Store(&msg)
		rv.log.Warn("unhealthy instance stopped at its bound with requests in flight: they get 502",
			"instance", in.name, "reason", OverMaxReasonUnhealthy, "in_flight", left, "bound", bound.Sub(now).Round(time.Millisecond))
	}
	rv.stopInstance(in, run, reason)
}

// noteIdle closes an unhealthy instance's idle channel once its last
// request has finished; rv.mu is held.
func (in *instance) noteIdle() {
	if in.idle == nil || in.inFlight > 0 {
		return
	}
	select {
	case <-in.idle:
	default:
		close(in.idle)
	}
}

// unhealthyBusy reports whether an unhealthy instance of the revision
// still runs requests (which the engine no longer counts); rv.mu is held.
func (rv *Revision) unhealthyBusy() bool {
	for _, in := range rv.insts {
		if in.unhealthy && in.inFlight > 0 {
			return true
		}
	}
	return false
}

// replaced lifts the minimum raised for an unhealthy instance's
// replacement once the engine has started it (or the revision retires);
// rv.mu is held.
func (rv *Revision) replaced() {
	if rv.replace == 0 {
		return
	}
	if st := rv.eng.Stats(); st.Starting+st.Ready < min(rv.replace, maxInstances(rv.cfg)) && !rv.retiring {
		return
	}
	rv.replace = 0
	if err := rv.eng.SetConfigShared(rv.engineConfig()); err != nil {
		rv.log.Warn("cannot lower the minimum raised for a replacement", "error", err)
	}
}

// liveness is a revision's liveness check and what it bounds
// (liveness.go; UnhealthyOverMax in state.go).
type liveness struct {
	live         *Liveness     // the check, defaults applied; nil: none. Set before run
	probes       *http.Client  // the probes' client; nil without a check
	replace      int           // min instances until an unhealthy instance's replacement has started
	overMaxGrace time.Duration // bounds an unhealthy instance's drain (MaxOverMaxGrace)
}
