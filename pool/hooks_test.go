package pool

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
)

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
