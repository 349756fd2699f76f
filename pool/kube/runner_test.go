package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/ptr"

	"github.com/tollgate/tollgate/pool"
)

func start(t *testing.T, r *Runner, id string) pool.Instance {
	t.Helper()
	in, err := r.Start(context.Background(), pool.InstanceSpec{Service: "hello", Revision: "hello-00001", ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func ready(t *testing.T, in pool.Instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

func isBound(in pool.Instance) bool {
	select {
	case <-in.(*instance).boundCh:
		return true
	default:
		return false
	}
}

func TestScaleUpBindsNewReadyPods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.run()
	a, b := start(t, e.r, "a"), start(t, e.r, "b")
	e.replicas(2)
	if a.Addr() != "" || isBound(a) {
		t.Fatalf("instance bound with no ready pod: %q", a.Addr())
	}
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	ready(t, a)
	if a.Addr() != "10.0.0.1:8080" {
		t.Errorf("first instance Addr = %q, want the first ready pod", a.Addr())
	}
	if isBound(b) {
		t.Error("second instance bound to a pod the first holds")
	}
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	ready(t, b)
	if b.Addr() != "10.0.0.2:8080" {
		t.Errorf("second instance Addr = %q, want 10.0.0.2:8080", b.Addr())
	}
	if got := testutil.ToFloat64(e.r.m.desired); got != 2 {
		t.Errorf("replicas_desired = %v, want 2", got)
	}
	if got := testutil.ToFloat64(e.r.m.ready); got != 2 {
		t.Errorf("ready_pods = %v, want 2", got)
	}
}

func TestScaleDownMarksThePodThenZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.run()
	a, b := start(t, e.r, "a"), start(t, e.r, "b")
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	ready(t, a)
	ready(t, b)
	e.replicas(2)

	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop(wait) }()
	e.replicas(1)
	if got := e.deletionCost("p2"); got != "-2147483648" {
		t.Errorf("deletion cost of the stopped instance's pod = %q, want the lowest", got)
	}
	if got := e.deletionCost("p1"); got != "" {
		t.Errorf("deletion cost of the kept pod = %q, want none", got)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while its pod was still ready", err)
	default:
	}
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}) // the ReplicaSet removed p2
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Stop did not return once its pod left")
	}
	if err := b.Err(); err != nil {
		t.Errorf("Err after Stop = %v", err)
	}
	select {
	case <-a.Done():
		t.Fatal("the kept instance ended")
	default:
	}

	if err := a.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	e.replicas(0)
	if err := a.Stop(time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestPodLeavingEndsItsInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.run()
	a, b, c := start(t, e.r, "a"), start(t, e.r, "b"), start(t, e.r, "c")
	// Ready==nil counts as ready; a pod in two slices counts once.
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1", ready: ptr.To(true)}, pod{name: "p2", ip: "10.0.0.2"})
	e.setSlice("hello-2", pod{name: "p2", ip: "10.0.0.2"}, pod{name: "p3", ip: "10.0.0.3", ready: ptr.To(false)})
	ready(t, a)
	ready(t, b)
	if isBound(c) {
		t.Fatalf("instance bound to a not-ready pod or a duplicate: %q", c.Addr())
	}
	e.replicas(3)

	// p3 turns ready: c binds; then p1 turns not ready: a ends at once.
	e.setSlice("hello-2", pod{name: "p2", ip: "10.0.0.2"}, pod{name: "p3", ip: "10.0.0.3"})
	ready(t, c)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1", ready: ptr.To(false)}, pod{name: "p2", ip: "10.0.0.2"})
	select {
	case <-a.Done():
	case <-time.After(wait):
		t.Fatal("instance of a not-ready pod not done")
	}
	if err := a.Err(); !errors.Is(err, ErrPodGone) {
		t.Errorf("Err = %v, want ErrPodGone", err)
	}
	if err := a.Stop(time.Second); err != nil || !errors.Is(a.Err(), ErrPodGone) {
		t.Errorf("Stop after the pod left = %v, Err then %v; Stop must not hide why it ended", err, a.Err())
	}
	// Deleting a slice removes its pods (p3 only there); p2 stays via hello-1.
	e.deleteSlice("hello-2")
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatal("instance of a pod whose slice was deleted not done")
	}
	select {
	case <-b.Done():
		t.Fatal("instance of a pod still listed in another slice ended")
	default:
	}
	// A replacement binds to the pod that came back.
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	d := start(t, e.r, "d")
	ready(t, d)
	if d.Addr() != "10.0.0.1:8080" {
		t.Errorf("replacement Addr = %q, want p1's", d.Addr())
	}
}

func TestConflictRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.scale.conflicts = 3
	e.run()
	start(t, e.r, "a")
	e.replicas(1)
	if got := testutil.ToFloat64(e.r.m.apiErrors.WithLabelValues("update_scale_conflict")); got != 3 {
		t.Errorf("conflicts counted = %v, want 3", got)
	}
	// The write is counted once Update returned, after the store (which
	// e.replicas watched) has it.
	eventually(t, "the write not counted", func() bool { return testutil.ToFloat64(e.r.m.writes) >= 1 })
	if got := testutil.ToFloat64(e.r.m.writes); got != 1 {
		t.Errorf("writes = %v, want 1", got)
	}
}

func TestWritesOnlyOnChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Resync = 10 * time.Millisecond })
	e.run()
	start(t, e.r, "a")
	e.replicas(1)
	before := func() int { e.scale.mu.Lock(); defer e.scale.mu.Unlock(); return e.scale.gets }()
	eventually(t, "resyncs read the scale", func() bool {
		e.scale.mu.Lock()
		defer e.scale.mu.Unlock()
		return e.scale.gets >= before+20
	})
	if _, writes := e.scale.get(); writes != 1 {
		t.Errorf("%d writes for one change", writes)
	}
	if got := testutil.ToFloat64(e.r.m.reported); got != 1 {
		t.Errorf("replicas_reported = %v after resyncs, want 1", got)
	}
	// Drift (someone else scaled) is corrected at the next resync.
	e.scale.mu.Lock()
	e.scale.replicas = 5
	e.scale.rv++
	e.scale.mu.Unlock()
	e.replicas(1)
}

func TestReadyTimeoutAndStopBeforeReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.ReadyTimeout = time.Second })
	e.run()
	a := start(t, e.r, "a")
	e.replicas(1)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := a.Ready(ctx); !errors.Is(err, ErrReadyTimeout) {
		t.Fatalf("Ready with no pod = %v, want ErrReadyTimeout", err)
	}
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	if err := a.Ready(ctx); !errors.Is(err, ErrReadyTimeout) {
		t.Errorf("second Ready after the timeout = %v", err)
	}
	if err := a.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	e.replicas(0)

	b := start(t, e.r, "b")
	if err := b.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Ready after Stop = %v, want ErrStopped", err)
	}
	e.replicas(0)
}

func TestNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, o := range []Options{
		{},
		{Target: Target{Namespace: "n"}},
		{Target: Target{Namespace: "n", Deployment: "d", Port: 70000}, Client: e.client, Scales: e.r.o.Scales},
		{Target: Target{Namespace: "n", Deployment: "d"}},
		{Target: Target{Namespace: "n", Deployment: "d"}, Client: e.client, Scales: e.r.o.Scales, Election: &Election{}},
	} {
		if _, err := New(o); !errors.Is(err, ErrOptions) {
			t.Errorf("New(%+v) = %v, want ErrOptions", o.Target, err)
		}
	}
	if got := e.r.Target(); got.Service != "hello" || got.Resource != deployments {
		t.Errorf("defaults: %+v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.r.Run(ctx); err != nil {
		t.Errorf("Run(cancelled) = %v, want nil", err)
	}
	if err := e.r.Run(ctx); !errors.Is(err, errNotRunning) {
		t.Errorf("second Run = %v, want an error", err)
	}
}

// A new runner does not scale away the pods a previous tollgate left
// running until AdoptFor has passed; its instances bind to them.
func TestAdoptsRunningPods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.AdoptFor = 2 * time.Second })
	e.scale.replicas = 2
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	began := time.Now()
	e.run()
	a := start(t, e.r, "a")
	ready(t, a) // at once: p1 is ready and free
	e.replicas(1)
	if took := time.Since(began); took < 2*time.Second {
		t.Errorf("replicas lowered after %v, inside the 2s adoption window", took)
	}
	if got := e.deletionCost("p2"); got == "" {
		t.Error("the surplus pod was not marked before lowering replicas")
	}
	if got := e.deletionCost(a.(*instance).podName); got != "" {
		t.Errorf("the adopted pod was marked (%q)", got)
	}
}

// The adoption window ends at the first Stop: the engine letting an
// instance go is a decision to lower replicas.
func TestStopEndsAdoption(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.AdoptFor = time.Hour })
	e.run()
	a := start(t, e.r, "a")
	e.replicas(1)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	ready(t, a)
	go a.Stop(wait)
	e.replicas(0)
}
