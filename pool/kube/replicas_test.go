package kube

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// leaderAndFollower starts two elected runners of e's Deployment and
// returns them once one leads.
func leaderAndFollower(t *testing.T, e *env) (leader, follower *Runner) {
	ra, _, _ := e.elected(t, "a")
	rb, _, _ := e.elected(t, "b")
	eventually(t, "one leader", func() bool { return leads(ra) || leads(rb) })
	if leads(rb) {
		ra, rb = rb, ra
	}
	eventually(t, "each sees the other", func() bool { return ra.Sharers() == 2 && rb.Sharers() == 2 })
	return ra, rb
}

// Scale-down never lets go of a pod another replica holds: the leader
// lowers replicas only by pods no replica holds, holds the count while
// every pod is in use, and marks exactly the free ones.
func TestSharedScaleDownLetsGoOnlyFreePods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	leader, follower := leaderAndFollower(t, e)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"}, pod{name: "p3", ip: "10.0.0.3"})
	f1, f2, f3 := start(t, follower, "f1"), start(t, follower, "f2"), start(t, follower, "f3")
	l1 := start(t, leader, "l1")
	for _, in := range []any{f1, f2, f3, l1} {
		ready(t, in.(*instance))
	}
	e.replicas(3)
	if got := l1.(*instance).podName; got != "p1" {
		t.Fatalf("the leader's instance bound %s, want p1 (lowest free name)", got)
	}
	// The follower lets go of p1 and p2 but keeps p3; the leader holds p1.
	byPod := map[string]*instance{}
	for _, in := range []any{f1, f2, f3} {
		byPod[in.(*instance).podName] = in.(*instance)
	}
	for _, p := range []string{"p1", "p2"} {
		if err := byPod[p].Stop(time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Asks are 1 and 1; held pods p1 (leader) and p3 (follower): only p2
	// may go.
	e.replicas(2)
	if e.deletionCost("p2") == "" {
		t.Error("p2, held by no replica, was not marked")
	}
	for _, p := range []string{"p1", "p3"} {
		if c := e.deletionCost(p); c != "" {
			t.Errorf("%s, held by a replica, was marked %q", p, c)
		}
	}
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p3", ip: "10.0.0.3"}) // the ReplicaSet removed p2
	// Every remaining pod is held: replicas stay 2 although both ask 1.
	time.Sleep(2 * retireSettle)
	if r, _ := e.scale.get(); r != 2 {
		t.Fatalf("replicas = %d while both pods are in use, want 2", r)
	}
	// The leader lets go of p1: now it is free and goes.
	if err := l1.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	e.replicas(1)
	if e.deletionCost("p1") == "" {
		t.Error("p1, freed by the leader, was not marked")
	}
	if c := e.deletionCost("p3"); c != "" {
		t.Errorf("p3, held by the follower, was marked %q", c)
	}
}

// A follower's first request at zero raises replicas through the leader:
// its ask is reported and the leader writes it.
func TestSharedFollowerWakesFromZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, follower := leaderAndFollower(t, e)
	began := time.Now()
	in := start(t, follower, "f1")
	e.replicas(1)
	t.Logf("replicas 0 → 1 %v after the follower's start", time.Since(began).Round(time.Millisecond))
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	ready(t, in)
}

// A pod the leader is letting go is not bound by a new instance; a report
// not heard from within the lease duration stops counting.
func TestSharedReportsRetiringAndStale(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Election = &Election{Identity: "me"} })
	r := e.r
	leaderRep, _ := json.Marshal(report{ID: "other", Ask: 4, Pods: []string{"p9"}, Retiring: []string{"p1"}})
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: r.o.Election.ReportLeaseName, Namespace: e.ns,
		Annotations: map[string]string{reportKey("other"): string(leaderRep), "unrelated": "x"},
	}}
	r.observeReports(lease, false)
	r.observeReports(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "tollgate-hello", Namespace: e.ns}}, false) // the election Lease: ignored
	if got := r.Sharers(); got != 2 {
		t.Fatalf("Sharers = %d, want 2", got)
	}
	r.setReady(map[string]endpoint{"p1": {pod: "p1", ip: "10.0.0.1", port: 8080}, "p2": {pod: "p2", ip: "10.0.0.2", port: 8080}}, map[string]bool{"p1": true, "p2": true})
	in := start(t, r, "i1")
	ready(t, in)
	if got := in.(*instance).podName; got != "p2" {
		t.Errorf("bound %s, want p2 (p1 is retiring)", got)
	}
	r.mu.Lock()
	want, held := r.sharedWantLocked(time.Now())
	r.mu.Unlock()
	if want != 4 || !held["p9"] || !held["p2"] {
		t.Errorf("want %d held %v, want 4 and p2, p9", want, held)
	}
	r.mu.Lock()
	for k, p := range r.peers {
		p.seen = time.Now().Add(-r.o.Election.LeaseDuration)
		r.peers[k] = p
	}
	want, _ = r.sharedWantLocked(time.Now())
	r.mu.Unlock()
	if want != 1 || r.Sharers() != 1 {
		t.Errorf("after the lease duration: want %d, sharers %d; want 1 and 1", want, r.Sharers())
	}
	r.observeReports(lease, true) // deleted
	r.mu.Lock()
	n := len(r.peers)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d peers after the report Lease was deleted", n)
	}
}

// Every identity gives a valid annotation key, distinct for distinct
// identities.
func TestReportKeyIsAValidAnnotation(t *testing.T) {
	t.Parallel()
	ids := []string{"tollgate-7d9f8-abcde", "Host.Example", strings.Repeat("x", 80), strings.Repeat("x", 81), "a b/c", "-x-", "ü", ""}
	seen := map[string]string{}
	for _, id := range ids {
		k := reportKey(id)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("reportKey(%q) = %q: %v", id, k, errs)
		}
		if prev, dup := seen[k]; dup {
			t.Errorf("reportKey(%q) = reportKey(%q) = %q", id, prev, k)
		}
		seen[k] = id
	}
}
