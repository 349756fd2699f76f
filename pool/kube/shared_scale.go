package kube

// This file is the leader's side of a shared Deployment (replicas.go):
// the count it writes and the pods it lets go.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// retireSettle is the least time the leader publishes the pods it is
// about to let go before it lowers replicas; it also waits until every
// fresh replica reports it has applied that list (report.Seen), so that
// a pod bound before the replica saw the list is in its report.
const retireSettle = 500 * time.Millisecond

// victim is a ready pod the leader is letting go.
type victim struct {
	since     time.Time // published as retiring since
	committed time.Time // replicas lowered for it; zero before
}

// heldFor is how long a replica's held pods stay protected after its
// last report: four lease durations, until the leader forgets it. Its
// ask counts for one lease duration only.
func (r *Runner) heldFor() time.Duration { return 4 * r.o.Election.LeaseDuration }

// sharedWantLocked is what the leader sets replicas to in shared mode:
// the largest fresh ask, its own included, or its decision on every
// replica's load (decide.go) when more and any replica asks for an
// instance (the count follows the decision; zero is decided by the
// replicas' idle timeouts, as each engine decides it, since the 10-minute
// average keeps the decision up long after the last request); and the
// pods some replica holds (own, or of a replica heard from within
// heldFor); r.mu is held.
func (r *Runner) sharedWantLocked(now time.Time) (want int, held map[string]bool) {
	want = r.live
	held = map[string]bool{}
	for key := range r.bound {
		held[key] = true
	}
	for _, p := range r.peers {
		age := now.Sub(p.seen)
		if age < r.o.Election.LeaseDuration {
			want = max(want, p.rep.Ask)
		}
		if age < r.heldFor() {
			for _, pod := range p.held {
				held[pod] = true
			}
		}
	}
	if want > 0 {
		want = max(want, r.decidedLocked(now))
	}
	return want, held
}

// unlistedLocked lists, sorted, the replicas whose held pods still
// count (heard from within heldFor) and whose report says it holds pods
// it could not list; r.mu is held.
func (r *Runner) unlistedLocked(now time.Time) []string {
	var over []string
	for _, p := range r.peers {
		if p.rep.More && now.Sub(p.seen) < r.heldFor() {
			over = append(over, p.rep.ID)
		}
	}
	slices.Sort(over)
	return over
}

// syncShared is syncScale in shared mode, given the scale read as s:
// replicas up to the count wanted (sharedWantLocked) at once; down only by pods no replica
// holds, each marked with the lowest deletion cost first, once every
// fresh replica has seen them published as retiring.
func (r *Runner) syncShared(ctx context.Context, s *autoscalingv1.Scale) error {
	now := time.Now()
	r.mu.Lock()
	r.selector = s.Status.Selector
	w, _ := r.sharedWantLocked(now)
	synced, requeue := r.reportsSynced(), r.requeue
	r.mu.Unlock()
	want, from := int32(w), s.Spec.Replicas
	r.m.desired.Set(float64(want))
	if err := r.sweepMarks(ctx, s.Status.Selector); err != nil {
		return err
	}
	if err := r.unmarkHeld(ctx, now); err != nil {
		return err
	}
	if want >= from {
		r.cancelVictims() // a scale-down called off: its pods are free again
		if want == from {
			return nil
		}
		return r.writeReplicas(ctx, s, want)
	}
	if now.UnixNano() < r.adoptUntil.Load() {
		r.log.Debug("not lowering replicas yet: adopting the running pods", "replicas", from, "want", want)
		return nil
	}
	if !synced {
		requeue(retireSettle)
		return nil // the other replicas' reports are not read yet
	}
	notReady, err := r.podsNotReady(ctx, s.Status.Selector, int(from))
	if err != nil {
		return err
	}
	to, victims, ready := r.sharedVictims(now, int(from), int(want), notReady)
	if !ready {
		requeue(retireSettle)
		return nil
	}
	if int32(to) == from {
		r.log.Debug("holding replicas: every pod is in use by a replica", "replicas", from, "want", want)
		return nil
	}
	r.mu.Lock()
	pods := make([]string, len(victims))
	for i, key := range victims {
		pods[i] = r.ready[key].pod // named: sharedVictims takes only named pods
	}
	r.mu.Unlock()
	for _, pod := range pods {
		if err := r.markForDeletion(ctx, pod); err != nil {
			return err // not lowered: the ReplicaSet would choose the pod
		}
	}
	r.commitVictims(victims, now)
	if err := r.writeReplicas(ctx, s, int32(to)); err != nil {
		if apierrors.IsConflict(err) {
			// Surely not written: the pods are victims still, not gone,
			// and one may yet be kept for an instance started meanwhile.
			// (Another error may hide a write that took effect: they stay
			// committed, neither bound nor chosen again.)
			r.commitVictims(victims, time.Time{})
		}
		return err
	}
	return nil
}

// commitVictims sets the time replicas were lowered for victims (zero:
// not lowered after all).
func (r *Runner) commitVictims(victims []string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range victims {
		if v, ok := r.victims[key]; ok {
			v.committed = at
			r.victims[key] = v
		}
	}
}

// sharedVictims chooses the ready pods to let go when replicas go from
// `from` down to want: named pods no replica holds and no started
// instance is about to bind, highest names first (every replica binds the
// lowest free names first, so the held pods stay a common prefix). The notReady pods go before any ready one (the
// ReplicaSet's own ranking), so they are counted first. It returns the
// new count, which stays above want while held pods keep it up, and the
// ready pods that go; ready is false until those pods have been published
// as retiring for retireSettle and every fresh replica reports it has
// applied that list (or, for a replica that never says, a lease duration
// has passed: one running an older tollgate).
func (r *Runner) sharedVictims(now time.Time, from, want, notReady int) (to int, victims []string, ready bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, held := r.sharedWantLocked(now)
	var free []string
	retiringBytes := 2 // of the committed victims still listed ready
	for key, ep := range r.ready {
		if v, ok := r.victims[key]; ok && !v.committed.IsZero() {
			// Replicas were already lowered for it (from counts it out),
			// and it stays in the retiring list until it leaves the
			// endpoints: it is neither free again nor a victim twice.
			retiringBytes += jsonLen(key) + 1
			continue
		}
		if !held[key] && ep.pod != "" {
			free = append(free, key)
		}
	}
	slices.Sort(free)
	if over := r.unlistedLocked(now); len(over) > 0 {
		// A replica holds pods its report could not list: any ready
		// pod may be one of them, so none goes (the not-ready ones
		// still may: the ReplicaSet takes them first).
		free = nil
		if !slices.Equal(over, r.unlistedLogged) {
			r.log.Warn("not letting any ready pod go: these replicas hold more pods than a report can list (about 1,500 each); run more tollgate replicas, or fewer instances per replica",
				"replicas", over)
		}
		r.unlistedLogged = over
	} else if r.unlistedLogged != nil {
		r.log.Info("every replica's report lists its pods again; scale-down resumes")
		r.unlistedLogged = nil
	}
	// Instances started and not yet bound (this replica's, and the
	// fresh replicas' asks beyond the pods they hold) take the lowest
	// free names next: those pods are kept for them.
	pending := max(0, r.live-len(r.bound))
	for _, p := range r.freshPeersLocked(now) {
		pending += max(0, p.rep.Ask-len(p.held))
	}
	free = free[min(pending, len(free)):]
	n := min(from-want, notReady+len(free))
	k := max(0, n-notReady)
	victims = fitRetiring(free[len(free)-k:], maxRetiringBytes-retiringBytes)
	n -= k - len(victims) // the rest go in a later step
	k = len(victims)
	changed := false
	for key, v := range r.victims {
		switch {
		case v.committed.IsZero() && !slices.Contains(victims, key):
			delete(r.victims, key) // held again, or no longer needed
			changed = true
		case !v.committed.IsZero() && now.Sub(v.committed) > r.o.Election.LeaseDuration && len(r.ready) <= from:
			// Replicas were lowered for it long ago and it is still
			// ready while the endpoints list no more ready pods than
			// replicas: the ReplicaSet removed another pod. Free
			// again. (With more listed, the deletions have not reached
			// the endpoints yet, however long that takes on a loaded
			// control plane: freed then, it was the first chosen
			// again, already gone, and replicas lowered for it a
			// second time took unmarked pods, perhaps held ones.)
			delete(r.victims, key)
			changed = true
		}
	}
	ready = true
	for _, key := range victims {
		v, ok := r.victims[key]
		switch {
		case !ok:
			r.victims[key] = victim{since: now}
			changed, ready = true, false
		case now.Sub(v.since) < retireSettle:
			ready = false
		}
	}
	if changed {
		r.retiringGen++
		r.bindLocked() // pods no longer retiring may be taken
		r.reportNow()
		return from - n, victims, false
	}
	if k == 0 {
		return from - n, victims, true
	}
	self := r.o.Election.Identity
	for _, p := range r.freshPeersLocked(now) {
		if p.rep.Seen != (retiringSeen{Leader: self, Gen: r.retiringGen}) && now.Sub(r.oldestVictimLocked(victims)) < r.o.Election.LeaseDuration {
			ready = false // not seen the list yet
		}
	}
	return from - n, victims, ready
}

// podsNotReady is how many of the Deployment's pods the ReplicaSet
// would remove before any ready one: from (the replicas asked for) less
// the ready endpoints, but never more than the pods whose own status
// says not Ready, since EndpointSlices lag pod status (a pod Ready but
// not yet listed ready would otherwise count as not ready, and the
// ReplicaSet would take a ready pod, perhaps a held one, instead). The
// pods are listed only when the endpoints show any not ready.
func (r *Runner) podsNotReady(ctx context.Context, selector string, from int) (int, error) {
	r.mu.Lock()
	byEndpoints := max(0, from-len(r.ready))
	r.mu.Unlock()
	if byEndpoints == 0 {
		return 0, nil
	}
	list, err := r.o.Client.CoreV1().Pods(r.o.Target.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		r.m.apiErrors.WithLabelValues("list_pods").Inc()
		return 0, fmt.Errorf("listing the pods for their readiness: %w", err)
	}
	byStatus := 0
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue // already going; not among the replicas asked for
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			byStatus++
		}
	}
	return min(byEndpoints, byStatus), nil
}

// oldestVictimLocked is when the longest-published of victims was
// published; r.mu is held.
func (r *Runner) oldestVictimLocked(victims []string) time.Time {
	oldest := time.Now()
	for _, key := range victims {
		if v := r.victims[key]; v.since.Before(oldest) {
			oldest = v.since
		}
	}
	return oldest
}

// cancelVictims forgets the victims replicas were not lowered for, so
// they can be bound again.
func (r *Runner) cancelVictims() {
	r.mu.Lock()
	changed := false
	for key, v := range r.victims {
		if v.committed.IsZero() {
			delete(r.victims, key)
			changed = true
		}
	}
	if changed {
		r.retiringGen++
		r.bindLocked() // instances waiting for a pod take them
	}
	r.mu.Unlock()
	if changed {
		r.reportNow()
	}
}

// sweepMarks reads, once per term of leadership, which pods an earlier
// leader left with the lowest deletion cost, so that unmarkHeld clears it
// from those a replica holds.
func (r *Runner) sweepMarks(ctx context.Context, selector string) error {
	r.mu.Lock()
	done := r.swept || selector == ""
	r.mu.Unlock()
	if done {
		return nil
	}
	list, err := r.o.Client.CoreV1().Pods(r.o.Target.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		r.m.apiErrors.WithLabelValues("list_pods").Inc()
		return fmt.Errorf("listing the pods for their deletion costs: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range list.Items {
		if p.Annotations[DeletionCostAnnotation] == lowestCost {
			r.marked[p.Name] = true
		}
	}
	r.swept = true
	return nil
}

// unmarkHeld removes the deletion cost from marked pods that a replica
// holds (a scale-down called off, then traffic came; or an earlier
// leader's mark): the ReplicaSet would remove them first. Marks of pods
// gone are forgotten.
func (r *Runner) unmarkHeld(ctx context.Context, now time.Time) error {
	r.mu.Lock()
	_, held := r.sharedWantLocked(now)
	var again []string
	for pod := range r.marked {
		switch _, ready := r.ready[pod]; {
		case held[pod]:
			again = append(again, pod)
		case !ready:
			delete(r.marked, pod) // gone (or not ready: the ReplicaSet takes it first anyway)
		}
	}
	r.mu.Unlock()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, DeletionCostAnnotation)
	var errs []error
	for _, pod := range again {
		if _, err := r.o.Client.CoreV1().Pods(r.o.Target.Namespace).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			r.m.apiErrors.WithLabelValues("patch_pod").Inc()
			errs = append(errs, fmt.Errorf("clearing the deletion cost of pod %s: %w", pod, err))
			continue
		}
		r.mu.Lock()
		delete(r.marked, pod)
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}
