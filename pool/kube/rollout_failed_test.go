package kube

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/pool"
)

// A new revision on a Deployment whose pods never get ready (a crashing
// image): its rollout fails at the rollout timeout, traffic stays on the
// old revision, which keeps its pod, and the new one is listed failed, as
// Knative leaves a route on its last ready revision.
func TestRolloutToAnUnreadyDeploymentLeavesTraffic(t *testing.T) {
	t.Parallel()
	old, broken := newEnv(t, nil), newEnv(t, nil)
	old.run()
	broken.run()
	var logs logtest.Buffer
	p := pool.New(pool.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registry: prometheus.NewRegistry()})
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	spec := pool.ServiceSpec{Name: "hello", Runner: old.r, Template: "image=v1", RolloutTimeout: 2 * time.Second,
		Engine: autoscale.Config{MinInstances: 1, MaxInstances: 3}}
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	runAll(t, p.Run)
	old.replicas(1)
	old.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	revisions := func() []pool.RevisionStatus {
		ts, err := p.Revisions("hello")
		if err != nil {
			t.Fatal(err)
		}
		return ts.Revisions
	}
	eventually(t, "hello-00001 ready on p1", func() bool { return revisions()[0].Ready == 1 })

	spec.Runner, spec.Template = broken.r, "image=v2"
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	broken.replicas(1) // its first pod asked for; none ever gets ready
	eventually(t, "hello-00002's rollout never failed", func() bool {
		r := revisions()
		return len(r) == 2 && r[1].State == "failed"
	})
	r := revisions()
	if !r[0].LatestReady || r[0].Percent != 100 || r[0].Ready != 1 || r[1].LatestReady || r[1].Percent != 0 {
		t.Fatalf("after the failed rollout: %+v; want hello-00001 the latest ready with 100 %% on its pod", r)
	}
	if n, _ := old.scale.get(); n != 1 {
		t.Fatalf("the old Deployment was scaled to %d replicas; want its 1 kept", n)
	}
}
