package kube

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Two runners of one Deployment with leader election: only the leader
// writes replicas, and it writes the largest ask, the follower's; when it
// stops it withdraws its report, the other takes over and writes its own
// count, and a Stop there lets go of the pod no replica holds.
func TestOnlyTheLeaderWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ra, ca, da := e.elected(t, "a")
	rb, cb, db := e.elected(t, "b")
	eventually(t, "one leader", func() bool { return leads(ra) || leads(rb) })
	leader, follower, stopLeader, leaderDone := ra, rb, ca, da
	if leads(rb) {
		leader, follower, stopLeader, leaderDone = rb, ra, cb, db
	}
	if leads(follower) {
		t.Fatal("both lead")
	}

	f1, f2 := start(t, follower, "f1"), start(t, follower, "f2")
	l1 := start(t, leader, "l1")
	e.replicas(2) // the follower's ask
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	ready(t, l1)
	ready(t, f1)
	ready(t, f2)
	if n := testutil.ToFloat64(follower.m.writes); n != 0 {
		t.Errorf("the follower wrote replicas %v times", n)
	}
	// The leader's report reaches the follower through the report Lease's
	// watch: at once on a quiet machine, not under four CPU burners.
	eventually(t, "the follower counts two sharers", func() bool { return follower.Sharers() == 2 })

	stopLeader()
	select {
	case <-leaderDone:
	case <-time.After(wait):
		t.Fatal("the leader's Run did not return")
	}
	eventually(t, "the follower leads", func() bool { return leads(follower) })
	eventually(t, "the old leader's report withdrawn", func() bool { return follower.Sharers() == 1 })
	e.replicas(2) // the new leader's own count
	if err := f2.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	e.replicas(1)
	// f1 bound p1 (lowest name first), so p2 is the pod no one holds.
	if f1.(*instance).podName != "p1" {
		t.Fatalf("f1 bound %s, want p1", f1.(*instance).podName)
	}
	if got := e.deletionCost("p2"); got == "" {
		t.Error("the pod no replica holds was not marked")
	}
	if got := e.deletionCost("p1"); got != "" {
		t.Errorf("the held pod was marked: %q", got)
	}
}

// elected is a runner of e's Deployment with leader election as id, run
// until the test ends. A renew deadline no stall of a loaded machine
// reaches, so a leader keeps its lease until it stops; it releases the
// lease then, so another takes over within a retry period.
func (e *env) elected(t *testing.T, id string) (*Runner, context.CancelFunc, chan struct{}) {
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

func leads(r *Runner) bool { return testutil.ToFloat64(r.m.leader) == 1 }
