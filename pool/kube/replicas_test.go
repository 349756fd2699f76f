package kube

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	k8stesting "k8s.io/client-go/testing"
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

// A pod the leader is letting go is not bound by a new instance, and this
// replica reports which list it applies; a list from a replica that does
// not lead is not applied; a report not heard from within the lease
// duration stops counting its ask, and its pods stay held until
// forgotten.
func TestSharedReportsRetiringAndStale(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Election = &Election{Identity: "me"} })
	r := e.r
	r.setLeader("other")
	leaderRep, _ := json.Marshal(report{ID: "other", Ask: 4, Pods: []string{"p9"}, Retiring: []string{"p1"}, RetiringGen: 7})
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
	rep := r.myReportLocked()
	r.mu.Unlock()
	if rep.Seen != (retiringSeen{Leader: "other", Gen: 7}) {
		t.Errorf("report says it applies %+v, want other's gen 7", rep.Seen)
	}
	// Another replica leads now: other's list no longer holds p1 back.
	r.setLeader("third")
	r.mu.Lock()
	free := r.freeLocked()
	r.mu.Unlock()
	if !slices.Contains(free, "p1") {
		t.Errorf("free pods %v once other no longer leads, want p1 among them", free)
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
	want, held = r.sharedWantLocked(time.Now())
	r.mu.Unlock()
	if want != 1 || r.Sharers() != 1 || !held["p9"] {
		t.Errorf("after the lease duration: want %d, sharers %d, held %v; want 1, 1 and p9 still held", want, r.Sharers(), held)
	}
	r.mu.Lock()
	for k, p := range r.peers {
		p.seen = time.Now().Add(-r.heldFor())
		r.peers[k] = p
	}
	_, held = r.sharedWantLocked(time.Now())
	r.mu.Unlock()
	if held["p9"] {
		t.Error("p9 still held four lease durations after its replica's last report")
	}
	r.observeReports(lease, true) // deleted: peers kept, this replica publishes again
	r.mu.Lock()
	n, force := len(r.peers), r.forceReport
	r.mu.Unlock()
	if n != 1 || !force {
		t.Errorf("after the report Lease was deleted: %d peers, republish %v; want 1 and true", n, force)
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

// peerReport writes replica rep.ID's report on e's report Lease, as that
// replica would.
func (e *env) peerReport(t *testing.T, rep report) {
	t.Helper()
	b, _ := json.Marshal(rep)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{reportKey(rep.ID): string(b)}}})
	if _, err := e.client.CoordinationV1().Leases(e.ns).Patch(context.Background(), "tollgate-hello-replicas", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// soleLeader is one elected runner of e's Deployment, leading, with the
// report Lease in place.
func soleLeader(t *testing.T, e *env) *Runner {
	t.Helper()
	r, _, _ := e.elected(t, "l")
	eventually(t, "it leads", func() bool { return leads(r) })
	eventually(t, "its report published", func() bool { return testutil.ToFloat64(r.m.sent) >= 1 })
	return r
}

// A scale-down called off (a request came while its pod was being
// published as retiring) leaves the pod bindable: the new instance gets
// it. A fresh replica that has not applied the retiring list holds the
// scale-down back meanwhile.
func TestSharedCalledOffScaleDownFreesThePod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := soleLeader(t, e)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	in := start(t, r, "i1")
	ready(t, in)
	e.replicas(1)
	e.peerReport(t, report{ID: "slow", Beat: 1}) // fresh, never applies a list
	eventually(t, "the peer is seen", func() bool { return r.Sharers() == 2 })
	if err := in.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "p1 published as retiring", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.victims["p1"]
		return ok
	})
	again := start(t, r, "i2")
	ready(t, again) // fails (times out) while p1 stays retiring
	if got := again.(*instance).podName; got != "p1" {
		t.Errorf("bound %s, want p1", got)
	}
	if n, _ := e.scale.get(); n != 1 {
		t.Errorf("replicas = %d, want 1", n)
	}
}

// The leader lowers replicas only once every fresh replica reports it has
// applied the retiring list, and not by a pod that report holds.
func TestSharedScaleDownWaitsForEveryReplicaToApplyTheList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := soleLeader(t, e)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	a, b := start(t, r, "a"), start(t, r, "b")
	ready(t, a)
	ready(t, b)
	e.replicas(2)
	e.peerReport(t, report{ID: "f", Beat: 1})
	eventually(t, "the peer is seen", func() bool { return r.Sharers() == 2 })
	if err := b.Stop(time.Second); err != nil { // b holds p2
		t.Fatal(err)
	}
	var gen uint64
	eventually(t, "p2 published as retiring", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.victims["p2"]
		gen = r.retiringGen
		return ok
	})
	time.Sleep(3 * retireSettle)
	if n, _ := e.scale.get(); n != 2 {
		t.Fatalf("replicas = %d before the peer applied the list, want 2", n)
	}
	// The peer bound p2 before it saw the list, and says so with the
	// list's generation: p2 is held, nothing goes.
	e.peerReport(t, report{ID: "f", Ask: 1, Pods: []string{"p2"}, Beat: 2, Seen: retiringSeen{Leader: "l", Gen: gen}})
	time.Sleep(3 * retireSettle)
	if n, _ := e.scale.get(); n != 2 {
		t.Fatalf("replicas = %d with p2 held by the peer, want 2", n)
	}
	if c := e.deletionCost("p2"); c != "" {
		t.Errorf("p2, held by the peer, marked %q", c)
	}
	// The peer lets p2 go and has applied the current list: down to 1.
	r.mu.Lock()
	gen = r.retiringGen
	r.mu.Unlock()
	e.peerReport(t, report{ID: "f", Beat: 3, Seen: retiringSeen{Leader: "l", Gen: gen}})
	eventually(t, "replicas 1 once the peer applied the list", func() bool {
		r.mu.Lock()
		g := r.retiringGen
		r.mu.Unlock()
		if g != gen { // the list changed again: say so
			gen = g
			e.peerReport(t, report{ID: "f", Beat: 4 + g, Seen: retiringSeen{Leader: "l", Gen: g}})
		}
		n, _ := e.scale.get()
		return n == 1
	})
	if e.deletionCost("p2") == "" {
		t.Error("p2 lowered without its deletion cost")
	}
}

// A deletion cost that cannot be set keeps replicas where they are: the
// ReplicaSet would otherwise choose the pod, perhaps a held one.
func TestSharedScaleDownNeedsTheMark(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var mu sync.Mutex
	fail := true
	e.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return true, nil, apierrors.NewServiceUnavailable("patch refused for the test")
		}
		return false, nil, nil
	})
	r := soleLeader(t, e)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	in := start(t, r, "i1")
	ready(t, in)
	e.replicas(1)
	if err := in.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a failed mark", func() bool { return testutil.ToFloat64(r.m.apiErrors.WithLabelValues("patch_pod")) >= 1 })
	time.Sleep(3 * retireSettle)
	if n, _ := e.scale.get(); n != 1 {
		t.Fatalf("replicas = %d after the mark failed, want 1", n)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	e.replicas(0)
}

// A pod that the EndpointSlices do not list ready yet but whose status is
// Ready is not counted as not ready: lowering by it would let the
// ReplicaSet take a ready pod, perhaps a held one. A free pod being
// retired is kept for an instance started meanwhile.
func TestSharedScaleDownTrustsPodStatusOverSliceLag(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.scale.mu.Lock()
	e.scale.replicas = 2
	e.scale.mu.Unlock()
	r := soleLeader(t, e)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	setPodReady := func(name string, ready bool) {
		t.Helper()
		ctx := context.Background()
		p, err := e.client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			p, err = e.client.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": "hello"}}}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Labels = map[string]string{"app": "hello"}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		if _, err := e.client.CoreV1().Pods(e.ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setPodReady("p1", true)
	setPodReady("p2", true) // Ready, not yet in the slice
	// The scale writes conflict until i1 holds p1, so that replicas are
	// not lowered first; a conflict leaves p1 a victim not yet lowered
	// for, which an instance started meanwhile may still have (before,
	// the pod stayed committed to go for a lease duration).
	e.scale.mu.Lock()
	e.scale.conflicts = 1 << 30
	e.scale.mu.Unlock()
	// With no instance p1 is free, and goes: published as retiring, then
	// marked, and replicas lowered, which conflicts.
	eventually(t, "p1 published as retiring", func() bool {
		r.poke()
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.victims["p1"]
		return ok
	})
	eventually(t, "a refused write of the lowered replicas", func() bool {
		r.poke()
		return testutil.ToFloat64(r.m.apiErrors.WithLabelValues("update_scale_conflict")) >= 1
	})
	// An instance started now is owed a pod: p1, not lowered for after
	// all, is kept for it; well before the lease duration (15 s), after
	// which a pod lowered for and still ready would be free again anyway.
	in := start(t, r, "i1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.Ready(ctx); err != nil { // holds p1: want 1, replicas 2
		t.Fatalf("i1 not given p1, the pod whose lowering conflicted: %v", err)
	}
	e.scale.mu.Lock()
	e.scale.conflicts = 0
	e.scale.mu.Unlock()
	time.Sleep(3 * retireSettle)
	if n, _ := e.scale.get(); n != 2 {
		t.Fatalf("replicas = %d while the only pod not listed ready is Ready by its status, want 2", n)
	}
	setPodReady("p2", false) // really not ready: it may go
	eventually(t, "replicas 1", func() bool {
		r.poke()
		n, _ := e.scale.get()
		return n == 1
	})
}
