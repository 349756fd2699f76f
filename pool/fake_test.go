package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// serverRunner is an in-process Runner for the pool's unit tests: each
// instance is a real HTTP server (httptest) that answers after a delay
// given per request with ?sleep=DURATION, and records the most requests it
// ever ran at once.
type serverRunner struct {
	tag          string // written in every answer, to tell revisions apart
	startupDelay time.Duration
	// handler, when set, answers every request instead (benchmarks use
	// the same trivial handler as the backend they compare with).
	handler http.Handler

	mu        sync.Mutex
	instances []*serverInstance
	starts    atomic.Int64
}

type serverInstance struct {
	srv       *httptest.Server
	id        string
	ready     chan struct{}
	done      chan struct{}
	doneOnce  sync.Once
	err       error
	stopped   atomic.Bool
	inFlight  atomic.Int64
	maxFlight atomic.Int64
	served    atomic.Int64
}

func (r *serverRunner) Start(ctx context.Context, spec InstanceSpec) (Instance, error) {
	r.starts.Add(1)
	si := &serverInstance{id: spec.ID, ready: make(chan struct{}), done: make(chan struct{})}
	si.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.handler != nil {
			r.handler.ServeHTTP(w, req)
			return
		}
		n := si.inFlight.Add(1)
		defer si.inFlight.Add(-1)
		for {
			m := si.maxFlight.Load()
			if n <= m || si.maxFlight.CompareAndSwap(m, n) {
				break
			}
		}
		si.served.Add(1)
		if d, err := time.ParseDuration(req.URL.Query().Get("sleep")); err == nil {
			select {
			case <-time.After(d):
			case <-req.Context().Done():
			}
		}
		fmt.Fprintf(w, "%s %s %s %s\n", r.tag, spec.Revision, spec.ID, req.URL.Path)
	}))
	go func() {
		time.Sleep(r.startupDelay)
		close(si.ready)
	}()
	r.mu.Lock()
	r.instances = append(r.instances, si)
	r.mu.Unlock()
	return si, nil
}

func (r *serverRunner) all() []*serverInstance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*serverInstance(nil), r.instances...)
}

// serving counts the requests the instances are running now: those that
// reached an instance, not only those the pool has sent on their way.
func (r *serverRunner) serving() int64 {
	var n int64
	for _, si := range r.all() {
		n += si.inFlight.Load()
	}
	return n
}

// running counts the instances that have not exited.
func (r *serverRunner) running() int {
	n := 0
	for _, si := range r.all() {
		select {
		case <-si.done:
		default:
			n++
		}
	}
	return n
}

func (si *serverInstance) Addr() string { return strings.TrimPrefix(si.srv.URL, "http://") }
func (si *serverInstance) Ready(ctx context.Context) error {
	select {
	case <-si.ready:
		return nil
	case <-si.done:
		return errors.New("exited before ready")
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (si *serverInstance) Done() <-chan struct{} { return si.done }
func (si *serverInstance) Err() error {
	<-si.done
	return si.err
}
func (si *serverInstance) Stop(grace time.Duration) error {
	si.stopped.Store(true)
	si.exit(nil)
	return nil
}

// crash makes the instance exit on its own, dropping its connections.
func (si *serverInstance) crash() { si.exit(errors.New("exit status 2")) }

func (si *serverInstance) exit(err error) {
	si.doneOnce.Do(func() {
		si.err = err
		si.srv.CloseClientConnections()
		si.srv.Close()
		close(si.done)
	})
}
func (si *serverInstance) CPUTime() (time.Duration, bool) { return 0, true }
func (si *serverInstance) PID() int                       { return 0 }

// testLogger logs to the test's output when -v is given.
func testLogger(_ testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// runPool runs p until the test ends, and checks that Run returns.
func runPool(t *testing.T, p *Pool) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return 30 s after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// get sends one GET through h and returns the status, body and headers.
func get(t *testing.T, h http.Handler, target string) (int, string, http.Header) {
	t.Helper()
	return getCtx(context.Background(), h, target)
}

func getCtx(ctx context.Context, h http.Handler, target string) (int, string, http.Header) {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body), rec.Result().Header
}

// eventually polls cond every 50 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// metricValue is the value of the counter or gauge name in reg whose
// labels include labels (name, value pairs); 0 when there is none.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metric
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
