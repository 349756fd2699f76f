package kube

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Replicas were lowered 4 → 2 for p3 and p4, and a lease duration later
// the endpoints still list all four ready: the ReplicaSet's deletions
// have not reached them (a loaded control plane, or a slow endpoints
// controller). The next step down (to 1) must not take p3 or p4 again,
// already gone, but p2: lowering replicas for a pod already gone would
// let the ReplicaSet take an unmarked one, perhaps a held one (seen
// beside burners in TestSharedLargeScaleDownMarksEveryPodItLowersBy:
// "replicas 50 with 146 pods, 0 of them marked"). Once the endpoints
// list no more ready pods than replicas, a committed pod still ready is
// one the ReplicaSet kept (it removed another): it is free again.
func TestSharedScaleDownDoesNotTakeAPodTwiceWhileEndpointsLag(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Election = &Election{Identity: "me"} })
	r := e.r
	ready := func(names ...string) {
		eps, listed := map[string]endpoint{}, map[string]bool{}
		for i, n := range names {
			eps[n] = endpoint{pod: n, ip: fmt.Sprintf("10.0.0.%d", i+1), port: 8080}
			listed[n] = true
		}
		r.setReady(eps, listed)
	}
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ready("p1", "p2", "p3", "p4")
	r.mu.Lock()
	r.victims = map[string]victim{"p3": {since: t0.Add(-time.Second), committed: t0}, "p4": {since: t0.Add(-time.Second), committed: t0}}
	r.mu.Unlock()

	later := t0.Add(r.o.Election.LeaseDuration + time.Second)
	var victims []string
	for now := later; now.Before(later.Add(3 * retireSettle)); now = now.Add(retireSettle) {
		_, victims, _ = r.sharedVictims(now, 2, 1, 0) // published, then settled
	}
	if !slices.Equal(victims, []string{"p2"}) {
		t.Errorf("replicas 2 → 1 while p3 and p4, lowered for, are still listed ready: victims %v, want [p2]", victims)
	}
	r.mu.Lock()
	_, p4 := r.victims["p4"]
	r.mu.Unlock()
	if !p4 {
		t.Error("p4 freed again while the endpoints list more ready pods than replicas")
	}

	// The endpoints caught up: the ReplicaSet removed p2 and p3, and kept
	// p4 (replicas 2: p1 and p4 ready). p4 is free again.
	ready("p1", "p4")
	r.mu.Lock()
	delete(r.victims, "p2")
	r.mu.Unlock()
	r.sharedVictims(later, 2, 2, 0)
	r.mu.Lock()
	_, p4 = r.victims["p4"]
	r.mu.Unlock()
	if p4 {
		t.Error("p4 still counted as lowered for a lease duration after, with the endpoints caught up: the ReplicaSet kept it")
	}
}
