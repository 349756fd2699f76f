package revision

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/runner"
)

// idleRunner starts nothing: the unit tests here drive a revision's
// engine and instances by hand, with no instance behind them.
type idleRunner struct{}

func (idleRunner) Start(context.Context, runner.InstanceSpec) (runner.Instance, error) {
	return nil, errors.New("idleRunner starts nothing")
}

// testLogger logs to the test's output when -v is given.
func testLogger(_ testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newTestRevision is a revision of service s on r with cfg and the
// pool's default limits.
func newTestRevision(t testing.TB, cfg autoscale.Config, r runner.Runner) *Revision {
	rv, err := New(Options{Service: "s", Name: "s-1", Config: cfg, Runner: r, Logger: testLogger(t),
		Limits: Limits{RequestTimeout: 5 * time.Minute, MaxPending: 1000, StopGrace: DefaultStopGrace}})
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{0, 0, time.Second, 2 * time.Second, 4 * time.Second}
	for n, w := range want {
		if got := backoff(n); got != w {
			t.Errorf("backoff(%d) = %v, want %v", n, got, w)
		}
	}
	if got := backoff(100); got != backoffCap {
		t.Errorf("backoff(100) = %v, want the cap %v", got, backoffCap)
	}
}

func TestConcurrencyIsTimeWeighted(t *testing.T) {
	t0 := time.Unix(100, 0)
	in := &instance{}
	in.advance(t0)
	// One request for the whole second, a second one for its last quarter.
	in.begin(t0)
	in.begin(t0.Add(750 * time.Millisecond))
	got := in.concurrency(t0.Add(time.Second))
	if got < 1.249 || got > 1.251 {
		t.Fatalf("average in flight %v, want 1.25", got)
	}
	// Next second: both end at 0.5 s.
	in.end(t0.Add(1500 * time.Millisecond))
	in.end(t0.Add(1500 * time.Millisecond))
	if got := in.concurrency(t0.Add(2 * time.Second)); got < 0.999 || got > 1.001 {
		t.Fatalf("average in flight %v, want 1", got)
	}
}

func TestRetryAfterIsThePendingWait(t *testing.T) {
	for _, c := range []struct {
		wait time.Duration
		want int64
	}{{0, 1}, {time.Millisecond, 1}, {10 * time.Second, 10}, {10*time.Second + time.Millisecond, 11}, {35 * time.Second, 35}} {
		if got := retryAfter(c.wait); got != c.want {
			t.Errorf("retryAfter(%v) = %d, want %d", c.wait, got, c.want)
		}
	}
}

func TestScaleReason(t *testing.T) {
	cfg := autoscale.Config{MinInstances: 1, MaxInstances: 5}
	for _, c := range []struct {
		to, policy   int
		idle, exited bool
		want         string
	}{
		{3, 3, false, false, "metrics"},
		{0, 2, false, false, "idle timeout"},
		{5, 8, false, false, "max instances"},
		{1, 0, false, false, "min instances"},
		{2, 0, false, false, "requests waiting"},
		// The drop to min instances at the idle timeout, while background
		// CPU still asks for 3 (it was logged "bounds").
		{1, 3, true, false, "idle timeout"},
		// The last instance crashed long before the idle timeout (it was
		// logged "idle timeout").
		{0, 1, false, true, "instance exited"},
	} {
		if got := scaleReason(cfg, c.to, c.policy, c.idle, c.exited); got != c.want {
			t.Errorf("scaleReason(to %d, driver asks %d) = %q, want %q", c.to, c.policy, got, c.want)
		}
	}
}

// TestRemainingBackoffCountsFromTheFailure: an instance launched after
// part of the backoff has passed since the last failure waits only the
// rest of it.
func TestRemainingBackoffCountsFromTheFailure(t *testing.T) {
	for _, c := range []struct {
		failures int
		since    time.Duration
		want     time.Duration
	}{
		{1, 0, 0},
		{2, 0, backoffBase},
		{2, 300 * time.Millisecond, 700 * time.Millisecond},
		{2, 1050 * time.Millisecond, 0},
		{4, time.Second, 3 * time.Second},
		{20, 10 * time.Second, backoffCap - 10*time.Second},
	} {
		if got := remainingBackoff(c.failures, c.since); got != c.want {
			t.Errorf("remainingBackoff(%d, %v) = %v, want %v", c.failures, c.since, got, c.want)
		}
	}
}

// TestFailureRunCountsFailuresInARow: only failures in a row reach the
// threshold; a success starts the count again.
func TestFailureRunCountsFailuresInARow(t *testing.T) {
	bad := errors.New("status 500")
	var f failureRun
	var got []bool
	for _, err := range []error{bad, bad, nil, bad, bad, bad, bad} {
		got = append(got, f.note(err, 3))
	}
	want := []bool{false, false, false, false, false, true, true}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("unhealthy after each probe: %v, want %v", got, want)
		}
	}
	var one failureRun
	if !one.note(bad, 1) {
		t.Fatal("threshold 1: the first failure did not make the instance unhealthy")
	}
}

// TestUnhealthyBoundIsTheRequestTimeoutOr15Minutes, on a fixed clock.
func TestUnhealthyBoundIsTheRequestTimeoutOr15Minutes(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		requestTimeout, want time.Duration
	}{
		{300 * time.Second, 300 * time.Second}, // Cloud Run's default request timeout
		{10 * time.Second, 10 * time.Second},
		{time.Hour, MaxOverMaxGrace}, // its largest
		{MaxOverMaxGrace, MaxOverMaxGrace},
	} {
		if got := unhealthyBound(at, c.requestTimeout, MaxOverMaxGrace); got.Sub(at) != c.want {
			t.Errorf("request timeout %v: bound %v after, want %v", c.requestTimeout, got.Sub(at), c.want)
		}
	}
}

// TestOverBy: the instances beyond max, at most the candidates.
func TestOverBy(t *testing.T) {
	for _, c := range []struct{ count, limit, cand, want int }{
		{2, 1, 1, 1}, // one unhealthy beside its replacement at max 1
		{1, 1, 1, 0}, // its replacement not started yet
		{3, 3, 1, 0}, // below max before: the replacement fits
		{4, 3, 1, 1},
		{5, 3, 1, 1}, // more beyond max than unhealthy: only those count
		{5, 3, 3, 2},
		{0, 1, 0, 0},
	} {
		if got := overBy(c.count, c.limit, c.cand); got != c.want {
			t.Errorf("overBy(%d, %d, %d) = %d, want %d", c.count, c.limit, c.cand, got, c.want)
		}
	}
}

// TestNewAppliesTheDefaults: zero limits take Cloud Run's defaults (a
// zero max pending would answer every request 429), a zero over-max
// grace is MaxOverMaxGrace, a liveness check gets its defaults and a
// probe client while a revision without one gets neither, and a check
// out of bounds is refused.
func TestNewAppliesTheDefaults(t *testing.T) {
	rv, err := New(Options{Service: "s", Name: "s-1", Runner: idleRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rv.State().Limits, (Limits{RequestTimeout: DefaultRequestTimeout, MaxPending: DefaultMaxPending, StopGrace: DefaultStopGrace}); got != want {
		t.Errorf("zero limits became %+v, want %+v", got, want)
	}
	if rv.overMaxGrace != MaxOverMaxGrace || rv.live != nil || rv.probes != nil || rv.State().Liveness {
		t.Errorf("no liveness check: over-max grace %v, check %v, probe client %v", rv.overMaxGrace, rv.live, rv.probes)
	}
	if err := rv.SetConfig(autoscale.Config{}, Limits{MaxPending: 7}); err != nil {
		t.Fatal(err)
	}
	if got := rv.State().Limits; got.MaxPending != 7 || got.RequestTimeout != DefaultRequestTimeout || got.StopGrace != DefaultStopGrace {
		t.Errorf("SetConfig with max pending 7 alone: limits %+v, want the other two defaulted", got)
	}

	rv, err = New(Options{Service: "s", Name: "s-1", Runner: idleRunner{}, Liveness: &Liveness{Path: "/healthz"}, OverMaxGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := Liveness{Path: "/healthz", Period: DefaultLivenessPeriod, Timeout: DefaultLivenessTimeout, FailureThreshold: DefaultLivenessFailureThreshold}
	if rv.live == nil || *rv.live != want || rv.probes == nil || !rv.State().Liveness || rv.overMaxGrace != time.Second {
		t.Errorf("liveness check: %+v (probe client %v), over-max grace %v; want %+v with a client and 1s", rv.live, rv.probes, rv.overMaxGrace, want)
	}

	_, err = New(Options{Service: "s", Name: "s-1", Runner: idleRunner{}, Liveness: &Liveness{Path: "healthz"}})
	if !errors.Is(err, ErrInvalidLiveness) || !strings.Contains(err.Error(), `liveness path "healthz"`) {
		t.Errorf("a path without its slash: %v, want ErrInvalidLiveness naming it", err)
	}
}
