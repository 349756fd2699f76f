package kube

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Two runners of one Deployment with leader election: only the leader
// writes replicas; when it stops, the other takes over and writes its own
// count. Both bind instances to pods.
func TestOnlyTheLeaderWrites(t *testing.T) {
	e := newEnv(t, nil)
	// A renew deadline no stall of a loaded machine reaches, so the leader
	// keeps its lease until it stops; it releases the lease then, so the
	// follower takes over within a retry period, not a lease duration.
	mk := func(id string) (*Runner, context.CancelFunc, chan struct{}) {
		o := e.r.o
		o.Registry = prometheus.NewRegistry()
		o.Election = &Election{Identity: id, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 100 * time.Millisecond}
		r, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var runErr error
		go func() { runErr = r.Run(ctx); close(done) }()
		t.Cleanup(func() {
			cancel()
			<-done
			if runErr != nil {
				t.Errorf("Run: %v", runErr)
			}
		})
		return r, cancel, done
	}
	ra, ca, da := mk("a")
	rb, cb, db := mk("b")
	lead := func(r *Runner) bool { return testutil.ToFloat64(r.m.leader) == 1 }
	eventually(t, "one leader", func() bool { return lead(ra) || lead(rb) })
	leader, follower, stopLeader, leaderDone := ra, rb, ca, da
	if lead(rb) {
		leader, follower, stopLeader, leaderDone = rb, ra, cb, db
	}
	if lead(follower) {
		t.Fatal("both lead")
	}

	f1, f2 := start(t, follower, "f1"), start(t, follower, "f2")
	l1 := start(t, leader, "l1")
	e.replicas(1)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	ready(t, l1)
	ready(t, f1)
	ready(t, f2) // a follower routes to every pod there is
	if _, writes := e.scale.get(); writes != 1 {
		t.Errorf("%d writes, want the leader's one", writes)
	}

	stopLeader()
	select {
	case <-leaderDone:
	case <-time.After(wait):
		t.Fatal("the leader's Run did not return")
	}
	eventually(t, "the follower leads", func() bool { return lead(follower) })
	e.replicas(2) // the new leader's own count
	if err := f2.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	e.replicas(1)
	if got := e.deletionCost("p2"); got == "" && f2.(*instance).podName == "p2" {
		t.Error("the new leader's Stop did not mark its pod")
	}
}
