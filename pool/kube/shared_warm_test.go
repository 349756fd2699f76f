package kube

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/traffic"
)

// A warm rollout on a follower (leader election): the pool of a replica
// that does not lead gives hello-00002 a share; its warm-up floor starts
// an instance there, the follower's ask carries it, the leader writes
// replicas 1, and the share moves once the instance holds the new pod.
func TestSharedWarmRolloutFromAFollower(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, follower := leaderAndFollower(t, e)
	old := newEnv(t, nil) // hello-00001's Deployment, on its own fake API server
	old.run()
	var logs logtest.Buffer
	p := pool.New(pool.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registry: prometheus.NewRegistry(), RolloutTimeout: time.Minute})
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	spec := func(traffic ...traffic.Target) []pool.ServiceSpec {
		return []pool.ServiceSpec{{Name: "hello", Runner: follower, Template: "kubernetes=hello", Engine: autoscale.Config{MaxInstances: 3},
			Bound:   []pool.BoundRevision{{Name: "hello-00001", Runner: old.r}},
			Traffic: traffic}}
	}
	if err := p.Apply(spec(traffic.Target{RevisionName: "hello-00001", Percent: 100})); err != nil {
		t.Fatal(err)
	}
	runAll(t, p.Run)
	// Running: hello-00002's loop has seen the other replica (a change
	// before Run moves at once, with nothing to warm).
	eventually(t, "hello-00002 running", func() bool {
		return strings.Contains(logs.String(), `msg="instances shared with other tollgate replicas" service=hello revision=hello-00002`)
	})
	if err := p.Apply(spec(traffic.Target{RevisionName: "hello-00001", Percent: 50}, traffic.Target{LatestRevision: true, Percent: 50})); err != nil {
		t.Fatal(err)
	}
	e.replicas(1)
	if leads(follower) {
		t.Fatal("the follower leads: the test wants the leader to write replicas")
	}
	share := func() int {
		ts, err := p.Revisions("hello")
		if err != nil || len(ts.Revisions) != 2 {
			return -1
		}
		return ts.Revisions[1].Percent
	}
	if got := share(); got != 0 {
		t.Fatalf("hello-00002 took %d %% before its instance was ready", got)
	}
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	eventually(t, "hello-00002 takes 50 % once its instance holds p1", func() bool { return share() == 50 })
}
