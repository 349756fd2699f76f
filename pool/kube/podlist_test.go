package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podNames is n pod names of one ReplicaSet, as Kubernetes makes them,
// sorted.
func podNames(n int) []string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	names := make([]string, n)
	for i := range names {
		suffix := make([]byte, 5)
		for j, k := 0, i*7919+13; j < 5; j, k = j+1, k/len(alphabet) {
			suffix[j] = alphabet[k%len(alphabet)]
		}
		names[i] = "checkout-api-7d9f8c6b5d-" + string(suffix)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// roundTrip is rep as another replica reads it from the Lease.
func roundTrip(t *testing.T, rep report) (report, string) {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got report
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	return got, string(b)
}

// A report lists a short list plainly (what every tollgate reads), a
// long one grouped, and one too long for its budget as a sorted prefix
// that says there is more; whatever it lists, the reader gets back.
func TestReportListsPodsWithinItsBudget(t *testing.T) {
	for _, tc := range []struct {
		pods        int
		plain, more bool
	}{{10, true, false}, {300, true, false}, {1000, false, false}, {1400, false, false}, {20000, false, true}} {
		names := podNames(tc.pods)
		rep := report{ID: "tollgate-0", Ask: len(names), Beat: 3}
		rep.Pods, rep.PodGroups, rep.More = listPods(names)
		got, raw := roundTrip(t, rep)
		t.Logf("%d pods: %d bytes, plain %v, more %v", len(names), len(raw), len(got.PodGroups) == 0, got.More)
		if plain := len(got.PodGroups) == 0; plain != tc.plain || got.More != tc.more {
			t.Errorf("%d pods: plain %v, more %v; want %v, %v", len(names), plain, got.More, tc.plain, tc.more)
		}
		if len(raw) > maxPodsBytes+200 {
			t.Errorf("%d pods: report is %d bytes, over the %d budget", len(names), len(raw), maxPodsBytes)
		}
		listed := got.heldPods()
		if !tc.more && !slices.Equal(listed, names) {
			t.Errorf("%d pods: read back %d names, not the %d listed", len(names), len(listed), len(names))
		}
		if tc.more && (len(listed) < 1000 || !slices.Equal(listed, names[:len(listed)])) {
			t.Errorf("%d pods, over budget: read back %d names, want a sorted prefix of at least 1000", len(names), len(listed))
		}
	}
}

// The reports of sixteen replicas, each holding more pods than a report
// lists, and the leader's longest retiring list pass the API server's
// own check of a Lease's annotations.
func TestSixteenReportsFitOneLease(t *testing.T) {
	names := podNames(30000)
	annotations := map[string]string{}
	for i := range 16 {
		rep := report{ID: fmt.Sprintf("tollgate-%d", i), Ask: len(names), Beat: 1 << 40, Seen: retiringSeen{Leader: "tollgate-0", Gen: 1 << 40}}
		rep.Pods, rep.PodGroups, rep.More = listPods(names)
		if i == 0 {
			rep.Retiring, rep.RetiringGen = fitRetiring(names, maxRetiringBytes), 1<<40
		}
		_, raw := roundTrip(t, rep)
		annotations[reportKey(rep.ID)] = raw
	}
	if errs := apimachineryvalidation.ValidateAnnotations(annotations, field.NewPath("metadata", "annotations")); len(errs) > 0 {
		t.Fatalf("the API server would refuse the report Lease: %v", errs.ToAggregate())
	}
}

// A step's retiring list is the highest names that fit its budget.
func TestRetiringListFitsItsBudget(t *testing.T) {
	names := podNames(2000)
	got := fitRetiring(names, maxRetiringBytes-2)
	b, _ := json.Marshal(got)
	if len(b) > maxRetiringBytes || len(got) < 100 || !slices.Equal(got, names[len(names)-len(got):]) {
		t.Fatalf("retiring %d names in %d bytes; want the highest names within %d bytes", len(got), len(b), maxRetiringBytes)
	}
	if short := names[:5]; !slices.Equal(fitRetiring(short, maxRetiringBytes), short) {
		t.Fatal("a short list was cut")
	}
}

// While a replica's report says it holds pods it could not list, the
// leader lets no ready pod go: any of them may be one of those. Once
// the report lists all it holds, the free pod goes.
func TestSharedLeaderKeepsEveryPodWhileAReportCannotListItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := soleLeader(t, e)
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	a, b := start(t, r, "a"), start(t, r, "b")
	ready(t, a)
	ready(t, b)
	e.replicas(2)
	e.peerReport(t, report{ID: "f", Ask: 1, Pods: []string{"p1"}, More: true, Beat: 1})
	eventually(t, "the peer is seen", func() bool { return r.Sharers() == 2 })
	if err := b.Stop(time.Second); err != nil { // p2 is free as far as any report lists
		t.Fatal(err)
	}
	time.Sleep(4 * retireSettle)
	r.mu.Lock()
	victims := len(r.victims)
	r.mu.Unlock()
	if n, _ := e.scale.get(); n != 2 || victims != 0 {
		t.Fatalf("replicas = %d, %d pods retiring, while a peer holds pods it could not list; want 2, none", n, victims)
	}
	// The peer's report lists all it holds now (p1): p2 goes.
	gen := uint64(0)
	e.peerReport(t, report{ID: "f", Ask: 1, Pods: []string{"p1"}, Beat: 2})
	eventually(t, "replicas 1 once the peer lists every pod it holds", func() bool {
		r.mu.Lock()
		g := r.retiringGen
		r.mu.Unlock()
		if g != gen {
			gen = g
			e.peerReport(t, report{ID: "f", Ask: 1, Pods: []string{"p1"}, Beat: 3 + g, Seen: retiringSeen{Leader: "l", Gen: g}})
		}
		n, _ := e.scale.get()
		return n == 1
	})
	if e.deletionCost("p2") == "" || e.deletionCost("p1") != "" {
		t.Errorf("deletion costs p1 %q, p2 %q; want only p2 marked", e.deletionCost("p1"), e.deletionCost("p2"))
	}
}

// Against a real API server: sixteen replicas' fullest reports are
// accepted on one report Lease, where reports listing the same 1,500
// pods each one by one (as before the budget) are refused once they
// pass the annotations' 256 KiB.
func TestClusterFullReportsFitTheReportLease(t *testing.T) {
	_, client, ns := controlPlane(t, "reports-")
	ctx := context.Background()
	leases := client.CoordinationV1().Leases(ns)
	names := podNames(30000)
	patch := func(lease, id, value string) error {
		p, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{reportKey(id): value}}})
		_, err := leases.Patch(ctx, lease, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	}
	for _, lease := range []string{"budgeted", "unbounded"} {
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 16 {
		rep := report{ID: fmt.Sprintf("tollgate-%d", i), Ask: len(names), Beat: 1 << 40}
		rep.Pods, rep.PodGroups, rep.More = listPods(names)
		if i == 0 {
			rep.Retiring, rep.RetiringGen = fitRetiring(names, maxRetiringBytes), 1<<40
		}
		_, raw := roundTrip(t, rep)
		if err := patch("budgeted", rep.ID, raw); err != nil {
			t.Fatalf("report %d of 16 refused: %v", i+1, err)
		}
	}
	refused := 0
	for i := range 16 {
		_, raw := roundTrip(t, report{ID: fmt.Sprintf("tollgate-%d", i), Ask: 1500, Pods: names[i*1500 : (i+1)*1500], Beat: 1})
		if err := patch("unbounded", fmt.Sprintf("tollgate-%d", i), raw); err != nil {
			if !apierrors.IsInvalid(err) {
				t.Fatalf("unbounded report %d: %v, want Invalid", i+1, err)
			}
			refused++
		}
	}
	t.Logf("unbounded reports of 1,500 pods: %d of 16 refused", refused)
	if refused == 0 {
		t.Fatal("the API server took 16 unbounded reports of 1,500 pods: the test no longer shows the limit")
	}
}

// A scale-down longer than one retiring list goes in steps, and every
// step lowers replicas only by pods it has marked: pods it already
// lowered for, still listed ready until the ReplicaSet's deletions reach
// the endpoints, are neither counted as free again nor marked twice. The
// test plays the ReplicaSet: on each write of replicas it deletes pods
// down to the count, marked ones first, and a step that would make it
// delete an unmarked pod (perhaps a held one) fails the test, as does a
// retiring list past its budget (the pods of earlier steps count).
func TestSharedLargeScaleDownMarksEveryPodItLowersBy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.AdoptFor = 2 * time.Second })
	names := podNames(400)
	podsOf := func(names []string) []pod {
		out := make([]pod, len(names))
		for i, n := range names {
			out[i] = pod{name: n, ip: fmt.Sprintf("10.0.%d.%d", i/200, i%200+1)}
		}
		return out
	}
	e.setSlice("hello-1", podsOf(names)...)
	e.scale.mu.Lock()
	e.scale.replicas = 400
	e.scale.mu.Unlock()
	r := soleLeader(t, e)
	held := names[:50] // a peer holds the 50 lowest names
	beat := uint64(1)
	peer := func(gen uint64) {
		beat++
		e.peerReport(t, report{ID: "f", Ask: len(held), Pods: held, Beat: beat, Seen: retiringSeen{Leader: "l", Gen: gen}})
	}
	peer(0)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var violations []string
	marks := 0
	wg.Add(1)
	go func() { // the ReplicaSet, and the peers' heartbeats
		defer wg.Done()
		live, seen := slices.Clone(names), 0
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			r.poke()
			r.mu.Lock()
			retiring, _ := json.Marshal(r.myReportLocked().Retiring)
			r.mu.Unlock()
			if len(retiring) > maxRetiringBytes {
				mu.Lock()
				violations = append(violations, fmt.Sprintf("a retiring list of %d bytes", len(retiring)))
				mu.Unlock()
			}
			n, writes := e.scale.get()
			if writes == seen || len(live) <= int(n) {
				continue
			}
			seen = writes
			var marked, rest []string
			for _, name := range live {
				p, err := e.client.CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
				if err == nil && p.Annotations[DeletionCostAnnotation] != "" {
					marked = append(marked, name)
				} else {
					rest = append(rest, name)
				}
			}
			excess := len(live) - int(n)
			mu.Lock()
			marks += min(excess, len(marked))
			if len(marked) < excess {
				violations = append(violations, fmt.Sprintf("replicas %d with %d pods, %d of them marked", n, len(live), len(marked)))
			}
			mu.Unlock()
			gone := min(excess, len(marked))
			live = append(marked[gone:], rest[:len(rest)-max(0, excess-gone)]...)
			slices.Sort(live)
			e.setSlice("hello-1", podsOf(live)...)
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	var gen uint64
	start := time.Now()
	// Three steps of 400 pods each (marks, a scale write, the ReplicaSet
	// played by the goroutine above reading every pod, a settle): about
	// 5 s on a quiet machine, 50 s or more beside four burners on two
	// cores with other work; the bound only keeps a stuck scale-down
	// from hanging the run.
	eventuallyWithin(t, 3*time.Minute, "replicas 50, the held pods", func() bool {
		r.mu.Lock()
		g := r.retiringGen
		r.mu.Unlock()
		if g != gen { // the peer applies each retiring list
			gen = g
			peer(g)
		}
		n, _ := e.scale.get()
		return n == int32(len(held))
	})
	t.Logf("replicas 50 after %v", time.Since(start).Round(time.Millisecond))
	time.Sleep(4 * retireSettle) // nothing more may go
	mu.Lock()
	defer mu.Unlock()
	e.scale.mu.Lock()
	writes := slices.Clone(e.scale.writes)
	e.scale.mu.Unlock()
	t.Logf("replicas written %v; %d pods deleted, all marked", writes, marks)
	if len(violations) > 0 {
		t.Fatalf("replicas lowered by pods not marked, or the retiring list past its budget: %v", violations)
	}
	if n, _ := e.scale.get(); n != int32(len(held)) {
		t.Fatalf("replicas = %d, want %d", n, len(held))
	}
	for _, name := range held {
		if c := e.deletionCost(name); c != "" {
			t.Errorf("held pod %s marked %q", name, c)
		}
	}
}
