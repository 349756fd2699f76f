package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tollgate/tollgate/autoscale"
)

// Three tollgate replicas, 8 requests at once through one of them,
// max_concurrency 6: the Deployment settles at the service's need,
// ceil(8 / 6 / 0.6) = 3 (SPEC §3), not at 7, the busy replica's need on
// its third of each pod, which each replica decided before the leader
// decided on the total. No request fails, and no pod runs more than its
// max concurrency from the three replicas together.
func TestClusterThreeReplicasDecideOnTheServiceTotal(t *testing.T) {
	c := newCluster(t)
	si := newStandIns(t)
	// A short idle timeout and surplus window: an instance the busy
	// replica started on demand before the shares followed the load
	// goes within seconds, not a minute.
	eng := autoscale.Config{MaxConcurrency: 6, MaxInstances: 10, IdleTimeout: 5 * time.Second,
		SurplusWindow: 5 * time.Second, InitialColdStart: 5 * time.Second}
	reps := []*replica{c.replica(t, "a", si, eng), c.replica(t, "b", si, eng), c.replica(t, "c", si, eng)}
	c.waitFor(t, "a leader, and each replica sees the others", func() bool {
		led := false
		for _, rp := range reps {
			led = led || leads(rp.r)
			if rp.r.Sharers() != 3 {
				return false
			}
		}
		return led
	})
	time.Sleep(1500 * time.Millisecond) // each pool applies the share at its next decision
	busy := reps[0]
	for _, rp := range reps {
		if !leads(rp.r) {
			busy = rp // a follower: its load reaches the leader through its report
			break
		}
	}

	var most atomic.Int32
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var watched sync.WaitGroup
	watched.Go(func() {
		for watchCtx.Err() == nil {
			most.Store(max(most.Load(), c.replicas(t)))
			time.Sleep(100 * time.Millisecond)
		}
	})
	began := time.Now()
	// Requests of 2 s: 8 clients keep close to 8 in flight. The count
	// reaches 3 once the 1-minute average has left the first seconds
	// behind: a count of 2 decided on them is held (Cloud Run's ±10 %)
	// until the need passes 2.2, 7.92 requests.
	l := busy.load(8, "/?sleep=2s")
	for c.replicas(t) != 3 {
		if time.Since(began) > 150*time.Second {
			l.end()
			t.Fatalf("replicas %d, not 3, %v after 8 requests at once began through one replica", c.replicas(t), time.Since(began).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
	reached := time.Since(began)
	time.Sleep(15 * time.Second) // past the 6-second window and the surplus window: settled
	var seen []int32
	for range 20 {
		seen = append(seen, c.replicas(t))
		time.Sleep(250 * time.Millisecond)
	}
	stopWatch()
	watched.Wait()
	l.end()
	t.Logf("8 requests at once through replica %s of 3: replicas 3 after %v, at most %d; settled %v; %d answered",
		busy.id, reached.Round(time.Millisecond), most.Load(), seen, l.ok.Load())
	for _, n := range seen {
		if n != 3 {
			t.Fatalf("replicas %v over 5 s once settled, want 3 throughout (ceil(8 / 6 / 0.6))", seen)
		}
	}
	if f := l.failed.Load(); f > 0 {
		t.Errorf("%d requests failed (last: %v)", f, l.last.Load())
	}
	for pod, n := range si.peaks() {
		if n > int64(eng.MaxConcurrency) {
			t.Errorf("pod %s ran %d requests at once from three replicas; max concurrency is %d", pod, n, eng.MaxConcurrency)
		}
	}
}

// A Deployment whose pod template limits nvidia.com/gpu is a GPU service,
// read through the real API server.
func TestClusterGPUFromThePodTemplate(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	// A patch, not an update: the controllers write the Deployment too.
	patch := `[{"op":"add","path":"/spec/template/spec/containers/-","value":` +
		`{"name":"model","image":"example.invalid/model:1","resources":{"limits":{"nvidia.com/gpu":"1"}}}}]`
	if _, err := c.client.AppsV1().Deployments(c.ns).Patch(ctx, "hello", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	r := c.runner(t, c.cfg, nil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	c.waitFor(t, "the runner reads the template's GPU", func() bool { return r.GPUs() == 1 })
}
