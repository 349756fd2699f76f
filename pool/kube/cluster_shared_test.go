package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
)

// cuttable is a transport that fails every call once cut: a replica
// killed with SIGKILL (its Lease is not renewed, its report not updated,
// nothing it held is released).
type cuttable struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c *cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("replica killed")
	}
	return c.rt.RoundTrip(r)
}

// replica is one tollgate replica of the test: a runner with leader
// election, a pool on it and a front server.
type replica struct {
	id     string
	r      *Runner
	front  *httptest.Server
	cut    *atomic.Bool
	reg    *prometheus.Registry // the pool's metrics
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *cluster) replica(t *testing.T, id string, si *standIns, eng autoscale.Config) *replica {
	t.Helper()
	rp := &replica{id: id, cut: &atomic.Bool{}, done: make(chan struct{})}
	cfg := rest.CopyConfig(c.cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &cuttable{rt: rt, cut: rp.cut} }
	rp.r = c.runner(t, cfg, func(o *Options) {
		o.Address = si.address
		o.Registry = prometheus.NewRegistry()
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("replica", id)
		o.AdoptFor = 0 // the default window: a new leader adopts the running pods
		o.Election = &Election{Identity: id, LeaseDuration: 8 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: 500 * time.Millisecond}
	})
	rp.reg = prometheus.NewRegistry()
	p := pool.New(pool.Options{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("replica", id), Registry: rp.reg})
	if err := p.Apply([]pool.ServiceSpec{{Name: "hello", Runner: rp.r, Template: "kubernetes", Engine: eng}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rp.cancel = cancel
	var wg sync.WaitGroup
	wg.Go(func() { _ = rp.r.Run(ctx) })
	wg.Go(func() { _ = p.Run(ctx) })
	go func() { wg.Wait(); close(rp.done) }()
	rp.front = httptest.NewServer(p.Handler("hello"))
	t.Cleanup(func() {
		rp.front.CloseClientConnections()
		rp.front.Close()
		cancel()
		select {
		case <-rp.done:
		case <-time.After(clusterLong):
			t.Errorf("replica %s did not stop", id)
		}
	})
	return rp
}

// exits is how many of rp's instances ended without being stopped (a pod
// that left the ready set under it).
func (rp *replica) exits(t *testing.T) float64 {
	t.Helper()
	mfs, err := rp.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "tollgate_pool_instance_exits_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func (rp *replica) get(path string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterLong)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rp.front.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// load sends requests through rp from n clients until stop; it counts
// answers that are not 200.
type load struct {
	wg     sync.WaitGroup
	stop   chan struct{}
	ok     atomic.Int64
	failed atomic.Int64
	last   atomic.Value // the last failure
}

func (rp *replica) load(n int, path string) *load {
	l := &load{stop: make(chan struct{})}
	for range n {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				code, err := rp.get(path)
				if err == nil && code == http.StatusOK {
					l.ok.Add(1)
					continue
				}
				l.failed.Add(1)
				l.last.Store(fmt.Sprintf("%d %v", code, err))
			}
		})
	}
	return l
}

func (l *load) end() { close(l.stop); l.wg.Wait() }

// Two tollgate replicas in front of one Deployment: a request at zero on
// the follower wakes it; one pod never runs more than max_concurrency
// requests from both together; the count follows both replicas' traffic
// and never drops under a replica still using it; when the leader is
// killed under load, the other takes over and no request through it
// fails, and replicas never go to zero.
func TestClusterReplicasShareADeployment(t *testing.T) {
	c := newCluster(t)
	si := newStandIns(t)
	const maxConc, maxInst = 2, 4
	eng := autoscale.Config{MaxConcurrency: maxConc, MaxInstances: maxInst, IdleTimeout: 2 * time.Second, InitialColdStart: 5 * time.Second}
	a, b := c.replica(t, "a", si, eng), c.replica(t, "b", si, eng)
	c.waitFor(t, "a leader", func() bool { return leads(a.r) || leads(b.r) })
	leader, follower := a, b
	if leads(b.r) {
		leader, follower = b, a
	}
	c.waitFor(t, "each replica sees the other", func() bool { return a.r.Sharers() == 2 && b.r.Sharers() == 2 })
	time.Sleep(1500 * time.Millisecond) // each pool applies the share at its next once-a-second decision

	// 1. Wake from zero through the follower.
	if n := c.replicas(t); n != 0 {
		t.Fatalf("replicas before any request = %d", n)
	}
	began := time.Now()
	woke := make(chan time.Duration, 1)
	go func() {
		for time.Since(began) < clusterLong {
			if c.replicas(t) > 0 {
				woke <- time.Since(began)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(woke)
	}()
	if code, err := follower.get("/"); err != nil || code != http.StatusOK {
		t.Fatalf("first request through the follower: %d %v", code, err)
	}
	answered := time.Since(began)
	d, ok := <-woke
	if !ok {
		t.Fatal("replicas never rose from zero")
	}
	t.Logf("follower at zero: replicas raised %v after the request, answered after %v", d.Round(time.Millisecond), answered.Round(time.Millisecond))
	// About a second on a quiet machine (kwok makes pods Ready at once);
	// the bound leaves room for a loaded one.
	if d > 10*time.Second {
		t.Errorf("replicas raised %v after the follower's request, want about a second", d)
	}
	if n := c.replicas(t); n != 1 {
		t.Errorf("replicas = %d after one request at zero, want 1 (no extra start)", n)
	}

	// 2. Load through both: the count follows the sum, and a pod never
	// runs more than maxConc requests at once from both replicas.
	la, lb := leader.load(3, "/?sleep=300ms"), follower.load(3, "/?sleep=300ms")
	c.waitFor(t, fmt.Sprintf("replicas = %d under both replicas' load", maxInst), func() bool { return c.replicas(t) == maxInst })
	time.Sleep(3 * time.Second)
	la.end()
	for pod, n := range si.peaks() {
		if n > maxConc {
			t.Errorf("pod %s ran %d requests at once from both replicas; max concurrency is %d", pod, n, maxConc)
		}
	}

	// 3. The leader goes idle, the follower keeps a light load: the
	// follower's pods stay, and none of its requests fails.
	// The leader's own engine lets its instances go at its idle timeout:
	// before issue 19 it then set replicas to its own count, 0.
	c.waitFor(t, "the idle leader asks for no instance", func() bool {
		leader.r.mu.Lock()
		defer leader.r.mu.Unlock()
		return leader.r.live == 0
	})
	time.Sleep(3 * eng.IdleTimeout)
	if n := c.replicas(t); n == 0 {
		t.Fatal("replicas 0 while the follower is under load")
	}
	if n := follower.exits(t); n != 0 {
		t.Fatalf("%v of the follower's instances lost their pod while the leader scaled down", n)
	}

	// 4. Kill the leader: the follower takes over within the lease
	// duration and adopts the pods; replicas never reach zero.
	lb2 := follower.load(1, "/?sleep=100ms")
	leader.cut.Store(true)
	leader.front.CloseClientConnections()
	killed := time.Now()
	zero := atomic.Bool{}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var watched sync.WaitGroup
	watched.Go(func() {
		for watchCtx.Err() == nil {
			if c.replicas(t) == 0 {
				zero.Store(true)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	c.waitFor(t, "the follower leads", func() bool { return leads(follower.r) })
	t.Logf("the follower led %v after the leader was killed (lease %v)", time.Since(killed).Round(time.Millisecond), follower.r.o.Election.LeaseDuration)
	time.Sleep(2 * follower.r.o.Election.LeaseDuration) // the killed replica's report goes stale
	stopWatch()
	watched.Wait()
	if zero.Load() {
		t.Error("replicas went to zero during the failover")
	}
	lb.end()
	lb2.end()
	if n := lb.failed.Load() + lb2.failed.Load(); n > 0 {
		t.Errorf("%d of the follower's requests failed (last: %v); %d answered", n, lb.last.Load(), lb.ok.Load()+lb2.ok.Load())
	}
	t.Logf("follower's requests: %d answered, %d failed; leader's: %d answered", lb.ok.Load()+lb2.ok.Load(), lb.failed.Load()+lb2.failed.Load(), la.ok.Load())

	// 5. Idle everywhere: back to zero.
	c.waitFor(t, "replicas = 0 when idle", func() bool { return c.replicas(t) == 0 })
}

// Three replicas with the load spread over them recommend what one
// replica recommends when it sees the whole load, ±1.
func TestClusterThreeReplicasScaleAsOne(t *testing.T) {
	const maxConc, clients = 6, 9
	eng := autoscale.Config{MaxConcurrency: maxConc, MaxInstances: 10, IdleTimeout: 2 * time.Second, InitialColdStart: 5 * time.Second}
	steady := func(c *cluster, reps []*replica) int32 {
		var loads []*load
		for i, rp := range reps {
			n := clients / len(reps)
			if i < clients%len(reps) {
				n++
			}
			loads = append(loads, rp.load(n, "/?sleep=300ms"))
		}
		time.Sleep(15 * time.Second) // past the 6-second window, the count settled
		n := c.replicas(t)
		for _, l := range loads {
			l.end()
			if f := l.failed.Load(); f > 0 {
				t.Errorf("%d requests failed (last: %v)", f, l.last.Load())
			}
		}
		return n
	}
	one := newCluster(t)
	solo := one.replica(t, "solo", newStandIns(t), eng)
	one.waitFor(t, "the replica leads", func() bool { return leads(solo.r) })
	alone := steady(one, []*replica{solo})

	three := newCluster(t)
	si := newStandIns(t)
	reps := []*replica{three.replica(t, "a", si, eng), three.replica(t, "b", si, eng), three.replica(t, "c", si, eng)}
	three.waitFor(t, "each replica sees the others", func() bool {
		for _, rp := range reps {
			if rp.r.Sharers() != 3 {
				return false
			}
		}
		return true
	})
	time.Sleep(1500 * time.Millisecond) // each pool applies the share at its next decision
	shared := steady(three, reps)
	t.Logf("%d clients: one replica seeing all → %d replicas; three replicas sharing the load → %d", clients, alone, shared)
	if d := shared - alone; d < -1 || d > 1 {
		t.Errorf("three replicas set %d replicas, one replica seeing the whole load %d: want within 1", shared, alone)
	}
	for pod, n := range si.peaks() {
		if n > maxConc {
			t.Errorf("pod %s ran %d requests at once from three replicas; max concurrency is %d", pod, n, maxConc)
		}
	}
}
