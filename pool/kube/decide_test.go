package kube

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
)

// engineMetrics is what an engine's metrics read with c requests in
// flight for ten minutes on ready instances at their full ACT value
// (share).
func engineMetrics(c float64, ready, share int) autoscale.Metrics {
	return autoscale.Metrics{Now: time.Now(), Concurrency6s: c, Concurrency1m: c, Concurrency10m: c,
		Active: int(c), Ready: ready, Live: ready, ACTCapacity: float64(share)}
}

// With two replicas, the leader decides on both replicas' load: its own
// through its engine's policy, the follower's from its report; the
// follower's engine then follows the leader's count, and the leader
// writes it. The replica carrying the load gets most of each pod, by the
// leader's split.
func TestSharedLeaderDecidesOnEveryReplicasLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	leader, follower := leaderAndFollower(t, e)
	cfg := autoscale.Config{MaxConcurrency: 6, MaxInstances: 10}
	share := cfg
	share.MaxConcurrency = 3
	local := autoscale.NewCloudRun(share)
	lp := leader.SharedPolicy("hello/hello-00001", cfg, 3, local)
	fp := follower.SharedPolicy("hello/hello-00001", cfg, 3, local)

	// The follower carries 8 requests, the leader none. Before the
	// leader has decided, the follower decides on its own share.
	if rec := fp.Recommend(engineMetrics(8, 3, 3)); rec.Count != 5 {
		t.Fatalf("follower before any decision: count %d, want its own ceil(8 / 3 / 0.6) = 5", rec.Count)
	}
	if b := fp.(pool.BasisPolicy).Basis(); b.Service {
		t.Errorf("follower before any decision says it decided on the service's load: %+v", b)
	}
	eventually(t, "the leader reads the follower's load", func() bool {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		for _, p := range leader.peers {
			if p.rep.Load != nil && p.rep.Load.Conc1m == 8 {
				return true
			}
		}
		return false
	})
	if rec := lp.Recommend(engineMetrics(0, 0, 3)); rec.Count != 3 {
		t.Fatalf("leader: count %d on 8 requests in all, want ceil(8 / 6 / 0.6) = 3", rec.Count)
	}
	start(t, follower, "f1") // its engine's first instance: it asks for one
	e.replicas(3)
	eventually(t, "the follower follows the leader's count", func() bool {
		return fp.Recommend(engineMetrics(8, 3, 3)).Count == 3
	})
	// Both scale logs show the service's needs: 8 in flight of 6 per pod.
	for name, p := range map[string]autoscale.Policy{"leader": lp, "follower": fp} {
		if b := p.(pool.BasisPolicy).Basis(); !b.Service || b.InFlight != 8 || b.NeedConcurrency != 2.222 {
			t.Errorf("%s's basis %+v, want the service's: 8 in flight, need_concurrency 8 / 6 / 0.6 = 2.222", name, b)
		}
	}
	follower.mu.Lock()
	primed := follower.total.current
	follower.mu.Unlock()
	if primed != 3 {
		t.Errorf("the follower's decider holds %d, want the leader's 3 (it takes over from there should it lead)", primed)
	}
	if n := testutil.ToFloat64(leader.m.decided); n != 3 {
		t.Errorf("tollgate_kube_service_count = %v, want 3", n)
	}
	// The split is the leader's: lowered first, raised once both apply.
	eventually(t, "the follower with all the load has 5 of 6 per pod (one left for the leader), the leader 1", func() bool {
		fp.Recommend(engineMetrics(8, 3, 3))
		lp.Recommend(engineMetrics(0, 0, 3))
		return follower.Share(6) == 5 && leader.Share(6) == 1
	})
}

// A runner without leader election is its own pool's only user: the
// policy is the engine's own, and the share the whole pod.
func TestUnsharedRunnerKeepsTheLocalPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	local := autoscale.NewCloudRun(autoscale.Config{})
	if p := e.r.SharedPolicy("hello/hello-00001", autoscale.Config{}, 80, local); p != autoscale.Policy(local) {
		t.Fatalf("policy %T, want the local one", p)
	}
	if s := e.r.Share(80); s != 80 {
		t.Fatalf("share %d of 80 alone", s)
	}
}

// The leader's decision raises replicas only while some replica asks for
// an instance: once every replica's engine has gone idle (asks 0), the
// count goes to zero although the 10-minute average still reads load.
func TestSharedDecisionLetsTheServiceGoIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	l := soleLeader(t, e)
	cfg := autoscale.Config{MaxConcurrency: 6, MaxInstances: 10}
	lp := l.SharedPolicy("hello/hello-00001", cfg, 6, autoscale.NewCloudRun(cfg))
	want := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		w, _ := l.sharedWantLocked(time.Now())
		return w
	}
	busy := steady(8, 1)
	e.peerReport(t, report{ID: "p", Ask: 1, Load: &busy})
	eventually(t, "the leader decides 3 on the peer's load", func() bool { return lp.Recommend(engineMetrics(0, 0, 6)).Count == 3 })
	if w := want(); w != 3 {
		t.Fatalf("replicas wanted %d with a replica asking 1 and the decision 3, want 3", w)
	}
	// The peer went idle: no request for its idle timeout, its engine
	// stopped its instances; its 10-minute average still reads load.
	idle := replicaLoad{Conc10m: 8, ACT: 1}
	e.peerReport(t, report{ID: "p", Ask: 0, Load: &idle})
	eventually(t, "the leader reads the idle report", func() bool {
		lp.Recommend(engineMetrics(0, 0, 6))
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, p := range l.peers {
			if p.rep.ID == "p" && p.rep.Ask == 0 {
				return true
			}
		}
		return false
	})
	if d := lp.Recommend(engineMetrics(0, 0, 6)).Count; d != 3 {
		t.Fatalf("decision %d on a 10-minute average of 8, want 3 still", d)
	}
	if w := want(); w != 0 {
		t.Fatalf("replicas wanted %d with every replica idle, want 0", w)
	}
}

// A replica routes by the leader's split: one request per pod before it
// has read the report Lease; an even split while the leader publishes
// none (a tollgate before splits); its part of the leader's split; one
// request while the split does not name it, or once the leader has not
// been heard from for two thirds of the lease duration (15 s here).
func TestShareFollowsTheLeadersSplit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) {
		o.Election = &Election{Identity: "b", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 100 * time.Millisecond}
	})
	r := e.r // never run: its peers are set here
	if s := r.Share(6); s != 1 {
		t.Fatalf("share %d of 6 before the report Lease is read, want 1", s)
	}
	split := splitByLoad([]string{"a", "b", "c"}, map[string]float64{"b": 9}, false)
	split.Version = shareVersion{Leader: "a", Gen: 4}
	set := func(leader report, seen time.Time) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reportsSynced = func() bool { return true }
		r.leaderID = "a"
		r.peers = map[string]peer{reportKey("a"): {rep: leader, seen: seen}, reportKey("c"): {rep: report{ID: "c"}, seen: time.Now()}}
		r.adoptSharesLocked(time.Now())
	}
	set(report{ID: "a"}, time.Now())
	if s := r.Share(6); s != 2 {
		t.Fatalf("share %d of 6 with a leader that publishes no split, want the even 2", s)
	}
	set(report{ID: "a", Shares: split}, time.Now())
	if s := r.Share(6); s != 4 {
		t.Fatalf("share %d of 6 with all the load of three by the leader's split, want 4", s)
	}
	if s := r.Share(80); s != 78 {
		t.Fatalf("share %d of 80 (another revision) by the same split, want 78", s)
	}
	r.mu.Lock()
	applied := r.myReportLocked().Applied
	r.mu.Unlock()
	if applied == nil || *applied != (shareVersion{}) {
		t.Fatalf("reports %+v applied at once, want the zero version until applyDelay passes", applied)
	}
	set(report{ID: "a", Shares: split}, time.Now().Add(-11*time.Second))
	if s := r.Share(6); s != 1 {
		t.Fatalf("share %d of 6 with the leader unheard for 11 s of 15, want 1", s)
	}
	other := splitByLoad([]string{"a", "c"}, nil, true)
	other.Version = shareVersion{Leader: "a", Gen: 5}
	set(report{ID: "a", Shares: other}, time.Now())
	if s := r.Share(6); s != 1 {
		t.Fatalf("share %d of 6 by a split that does not name it, want 1", s)
	}
	bad := &assignment{Version: shareVersion{Leader: "a", Gen: 6}, Members: 1, Parts: map[string]int{"b": 2 * shareParts}}
	set(report{ID: "a", Shares: bad}, time.Now())
	if s := r.Share(6); s != 1 {
		t.Fatalf("share %d of 6 after an invalid split, want 1 still (the last valid one's)", s)
	}
}
