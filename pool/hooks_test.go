package pool

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
)

// gpuRunner is a serverRunner whose instances have gpus GPUs each
// (GPURunner), as a Deployment whose pod template asks for them.
type gpuRunner struct {
	*serverRunner
	gpus atomic.Int64
}

func (r *gpuRunner) GPUs() int { return int(r.gpus.Load()) }

// A runner that reports GPUs makes a GPU service: idle instances are kept
// 10 minutes at most, whatever the config's idle timeout; a shorter one
// stays; a runner whose instances lose their GPUs gives the configured
// timeout back.
func TestRunnerGPUsMakeAGPUService(t *testing.T) {
	for _, tc := range []struct {
		idle, want time.Duration
	}{
		{0, autoscale.DefaultGPUIdleTimeout},
		{15 * time.Minute, autoscale.DefaultGPUIdleTimeout},
		{time.Hour, autoscale.DefaultGPUIdleTimeout},
		{5 * time.Minute, 5 * time.Minute},
	} {
		r := &gpuRunner{serverRunner: &serverRunner{}}
		r.gpus.Store(1)
		rv, err := newRevision("s", "s-1", autoscale.Config{IdleTimeout: tc.idle}, r, ServiceSpec{}.limits(), testLogger(t), New(Options{}).m.revision("s", "s-1"))
		if err != nil {
			t.Fatal(err)
		}
		if c := rv.eng.Config(); c.GPUs != 1 || c.IdleTimeout != tc.want {
			t.Errorf("idle_timeout %v with a GPU runner: engine GPUs %d, idle timeout %v; want 1 and %v", tc.idle, c.GPUs, c.IdleTimeout, tc.want)
		}
		r.gpus.Store(0)
		rv.mu.Lock()
		rv.reshare() // once a second in the pool
		c := rv.eng.Config()
		rv.mu.Unlock()
		want := tc.idle
		if want == 0 {
			want = autoscale.DefaultIdleTimeout
		}
		if c.GPUs != 0 || c.IdleTimeout != want {
			t.Errorf("idle_timeout %v after the GPUs went: engine GPUs %d, idle timeout %v; want 0 and %v", tc.idle, c.GPUs, c.IdleTimeout, want)
		}
	}
}

// loadSharer is a sharedRunner that gives this replica share requests of
// each instance and a policy that always asks for count instances.
type loadSharer struct {
	*sharedRunner
	share, count int
	keys         []string
	full         []int // the max concurrency SharedPolicy was given
	// basis, when set, is what the policy says it decided on (BasisPolicy).
	basis *Basis
}

func (r *loadSharer) Share(int) int { return r.share }

func (r *loadSharer) SharedPolicy(key string, cfg autoscale.Config, share int, local autoscale.Policy) autoscale.Policy {
	r.keys = append(r.keys, key)
	r.full = append(r.full, cfg.WithDefaults().MaxConcurrency)
	if r.basis != nil {
		return basisPolicy{fixedPolicy(r.count), *r.basis}
	}
	return fixedPolicy(r.count)
}

// basisPolicy is a fixedPolicy that says what it decided on.
type basisPolicy struct {
	fixedPolicy
	b Basis
}

func (p basisPolicy) Basis() Basis { return p.b }

type fixedPolicy int

func (p fixedPolicy) Recommend(autoscale.Metrics) autoscale.Recommendation {
	return autoscale.Recommendation{Count: int(p), Driver: autoscale.DriverConcurrency}
}

// A LoadSharer's share replaces max concurrency / sharers, and its policy
// decides the count; it is given the whole max concurrency.
func TestLoadSharerSetsShareAndPolicy(t *testing.T) {
	r := &loadSharer{sharedRunner: &sharedRunner{serverRunner: &serverRunner{}}, share: 5, count: 3}
	r.n.Store(3)
	rv, err := newRevision("s", "s-1", autoscale.Config{MaxConcurrency: 6, MaxInstances: 10}, r, ServiceSpec{}.limits(), testLogger(t), New(Options{}).m.revision("s", "s-1"))
	if err != nil {
		t.Fatal(err)
	}
	rv.mu.Lock()
	rv.reshare()
	mc := rv.eng.Config().MaxConcurrency
	now := time.Now()
	rv.eng.Route(now) // a request: the engine scales from zero only for one
	rec := rv.eng.Tick(now).Recommendation
	rv.mu.Unlock()
	if mc != 5 {
		t.Errorf("engine max concurrency %d, want the runner's share 5 (not 6 / 3)", mc)
	}
	if rec.Count != 3 {
		t.Errorf("count %d, want the shared policy's 3", rec.Count)
	}
	if len(r.keys) == 0 || r.keys[len(r.keys)-1] != "s/s-1" || r.full[len(r.full)-1] != 6 {
		t.Errorf("SharedPolicy given keys %v and max concurrency %v, want s/s-1 and 6", r.keys, r.full)
	}
}

// With several replicas the scale log shows what the count was decided
// on: the service's needs over every replica's load, as the shared
// policy gives them, not what this replica's one request asks of its
// share of an instance (1 / 3 / 0.6 = 0.56, which would read as "requests
// waiting" beside a count of 3).
func TestScaleLogShowsTheServiceNeedsOfASharedPolicy(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	basis := Basis{Service: true, NeedConcurrency: 2.222, NeedCPU: 0.5, NeedACT: 2.1, InFlight: 8}
	r := &loadSharer{sharedRunner: &sharedRunner{serverRunner: &serverRunner{tag: "v1"}}, share: 3, count: 3, basis: &basis}
	r.n.Store(3)
	p := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registry: prometheus.NewRegistry()})
	if err := p.Apply([]ServiceSpec{{Name: "s", Runner: r, Engine: autoscale.Config{MaxConcurrency: 6, MaxInstances: 10}}}); err != nil {
		t.Fatal(err)
	}
	runPool(t, p)
	if code, body, _ := get(t, p.Handler("s"), "/"); code != 200 {
		t.Fatalf("request: %d %s", code, body)
	}
	var e ScaleEvent
	// The decision is in Status before its log line is written: wait for
	// both.
	eventually(t, 10*time.Second, "a scale decision and its log line", func() bool {
		sc := p.Status()[0].Scales
		if len(sc) > 0 {
			e = sc[len(sc)-1]
		}
		return len(sc) > 0 && strings.Contains(logs.String(), "msg=scale ")
	})
	if e.To != 3 || e.Reason != "metrics" || e.DriverCount != 3 || e.NeedConcurrency != 2.222 || e.InFlight != 8 || e.DecidedOn != "every replica's load" {
		t.Errorf("scale decision %+v: want 0 → 3 for metrics, driver count 3, need_concurrency 2.222 and 8 in flight on every replica's load", e)
	}
	line := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "msg=scale ") {
			line = l
		}
	}
	for _, want := range []string{"to=3", "reason=metrics", "need_concurrency=2.222", "in_flight=8", `decided_on="every replica's load"`} {
		if !strings.Contains(line, want) {
			t.Errorf("scale log line %q lacks %s", line, want)
		}
	}
}
