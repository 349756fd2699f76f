package pool

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
)

// TestLastCrashIsScaledDownAsExited: the only instance crashes a moment
// after its request was answered, with a one-minute idle timeout. The
// drop to zero is logged for the crash, not as "idle timeout".
func TestLastCrashIsScaledDownAsExited(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "v1"}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Engine: autoscale.Config{IdleTimeout: time.Minute}})
	runPool(t, p)
	if code, _, _ := get(t, p.Handler("s"), "/"); code != 200 {
		t.Fatal(code)
	}
	last := func() ScaleEvent {
		sc := p.Status()[0].Scales
		if len(sc) == 0 {
			return ScaleEvent{}
		}
		return sc[len(sc)-1]
	}
	eventually(t, 10*time.Second, "the count never rose to 1", func() bool { return last().To == 1 })
	r.all()[0].crash()
	eventually(t, 10*time.Second, "the count did not fall after the crash", func() bool { return last().To == 0 })
	if e := last(); e.From != 1 || e.Reason != "instance exited" {
		t.Fatalf("scale decision after the crash: %+v, want 1 → 0 for %q", e, "instance exited")
	}
}

// TestFailedStartIsNotReplacedForItsAnsweredRequest: the only request's
// start fails and the request is answered 503 at once. Nothing is pending
// or in flight any more, so no replacement is started on demand (one was,
// right after the 503, and crash-looping services ran a second failing
// command a second after their only request had been answered).
func TestFailedStartIsNotReplacedForItsAnsweredRequest(t *testing.T) {
	t.Parallel()
	r := &failingRunner{}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Engine: autoscale.Config{MaxInstances: 3, IdleTimeout: time.Minute}})
	runPool(t, p)
	if code, body, _ := get(t, p.Handler("s"), "/"); code != 503 || !strings.Contains(body, "no such command") {
		t.Fatalf("request whose start failed: %d %q, want 503 with the reason", code, body)
	}
	// Three ticks: neither the exit nor a Tick starts one.
	time.Sleep(3 * time.Second)
	if n := len(r.times()); n != 1 {
		t.Fatalf("%d starts for one request answered 503, want 1", n)
	}
	if st := p.Status()[0]; len(st.Instances) != 0 || st.Pending != 0 {
		t.Fatalf("after the failed start: %+v, want no instance and nothing pending", st)
	}
}

// TestMinInstancesReplaceFailedStarts: with min instances 1 and no
// request, an instance whose start fails is still replaced, again and
// again at the crash-loop backoff's pace.
func TestMinInstancesReplaceFailedStarts(t *testing.T) {
	t.Parallel()
	r := &failingRunner{}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Engine: autoscale.Config{MinInstances: 1, MaxInstances: 3}})
	runPool(t, p)
	eventually(t, 30*time.Second, "fewer than 3 starts for min instances 1", func() bool { return len(r.times()) >= 3 })
	ts := r.times()
	if gap := ts[2].Sub(ts[1]); gap < time.Second-100*time.Millisecond {
		t.Fatalf("third start %v after the second failure, want a backoff of %v", gap, time.Second)
	}
}

// TestCrashLogCountsEveryFailedRequest: two requests run on the only
// instance when it crashes; both get 502, and the crash's log line
// counts both (it said 1: the proxy answered one before the engine
// was told, which then no longer counted it).
func TestCrashLogCountsEveryFailedRequest(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	p := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registry: prometheus.NewRegistry()})
	r := &serverRunner{tag: "v1"}
	if err := p.Apply([]ServiceSpec{{Name: "s", Runner: r, Engine: autoscale.Config{MaxConcurrency: 2, MaxInstances: 1}}}); err != nil {
		t.Fatal(err)
	}
	runPool(t, p)
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			code, _, _ := get(t, p.Handler("s"), "/?sleep=30s")
			codes <- code
		}()
	}
	eventually(t, 10*time.Second, "the two requests never ran together", func() bool { return r.serving() == 2 })
	r.all()[0].crash()
	for range 2 {
		if c := <-codes; c != http.StatusBadGateway {
			t.Fatalf("a request on the crashed instance: %d, want 502", c)
		}
	}
	eventually(t, 10*time.Second, "no crash line", func() bool { return strings.Contains(logs.String(), "instance exited on its own") })
	if l := logs.String(); !strings.Contains(l, "requests_failed=2") {
		t.Fatalf("the crash line does not count 2 failed requests:\n%s", l)
	}
}
