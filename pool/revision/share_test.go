package revision

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// gpuRunner is a runner whose instances have gpus GPUs each
// (runner.GPURunner), as a Deployment whose pod template asks for them.
type gpuRunner struct {
	idleRunner
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
		r := &gpuRunner{}
		r.gpus.Store(1)
		rv := newTestRevision(t, autoscale.Config{IdleTimeout: tc.idle}, r)
		if c := rv.engineConfigNow(); c.GPUs != 1 || c.IdleTimeout != tc.want {
			t.Errorf("idle_timeout %v with a GPU runner: engine GPUs %d, idle timeout %v; want 1 and %v", tc.idle, c.GPUs, c.IdleTimeout, tc.want)
		}
		r.gpus.Store(0)
		rv.mu.Lock()
		rv.reshare() // once a second in the pool
		rv.mu.Unlock()
		c := rv.engineConfigNow()
		want := tc.idle
		if want == 0 {
			want = autoscale.DefaultIdleTimeout
		}
		if c.GPUs != 0 || c.IdleTimeout != want {
			t.Errorf("idle_timeout %v after the GPUs went: engine GPUs %d, idle timeout %v; want 0 and %v", tc.idle, c.GPUs, c.IdleTimeout, want)
		}
	}
}

// loadSharer is a runner shared by n replicas (runner.LoadSharer) that
// gives this replica share requests of each instance and a policy that
// always asks for count instances.
type loadSharer struct {
	idleRunner
	n            int
	share, count int
	keys         []string
	full         []int // the max concurrency SharedPolicy was given
}

func (r *loadSharer) Sharers() int  { return r.n }
func (r *loadSharer) Share(int) int { return r.share }

func (r *loadSharer) SharedPolicy(key string, cfg autoscale.Config, share int, local autoscale.Policy) autoscale.Policy {
	r.keys = append(r.keys, key)
	r.full = append(r.full, cfg.WithDefaults().MaxConcurrency)
	return fixedPolicy(r.count)
}

// fixedPolicy always asks for its count.
type fixedPolicy int

func (p fixedPolicy) Recommend(autoscale.Metrics) autoscale.Recommendation {
	return autoscale.Recommendation{Count: int(p), Driver: autoscale.DriverConcurrency}
}

// A LoadSharer's share replaces max concurrency / sharers, and its policy
// decides the count; it is given the whole max concurrency.
func TestLoadSharerSetsShareAndPolicy(t *testing.T) {
	r := &loadSharer{n: 3, share: 5, count: 3}
	rv := newTestRevision(t, autoscale.Config{MaxConcurrency: 6, MaxInstances: 10}, r)
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

// engineConfigNow is the config the revision's engine runs with.
func (rv *Revision) engineConfigNow() autoscale.Config {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.eng.Config()
}
