package kube

// This file is how several tollgate replicas in front of one Deployment
// share it (Options.Election). Every replica runs its own pool and engine
// on the traffic it receives; what it asks for (its live instances),
// which pods its instances hold and the load its engines measured, it
// reports as one annotation on a Lease all replicas share, the report
// Lease. The leader reads every fresh report, decides the service's count
// on their summed load (total.go, decide.go) and publishes it in its own
// report for the others' engines to follow, sets replicas to that count
// or the largest ask when more, and lets go only pods that no replica
// holds.
//
// The transport is the API server, not a stream between replicas: a
// replica's report changes when its pool starts or stops an instance, or
// binds one, and, under traffic, when its load does, at most once a
// second (loadEvery), plus a heartbeat every third of the lease duration.
// Per-request measurements never leave the replica: only its engines'
// window averages cross. So no port, no peer discovery and no
// authentication of our own: the API server authorises every write with
// RBAC (patch on one named Lease).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/tollgate/tollgate/retry"
)

// ReportAnnotationPrefix prefixes each replica's annotation on the report
// Lease (Election.ReportLeaseName).
const ReportAnnotationPrefix = "replicas.tollgate.dev/"

// report is one replica's annotation on the report Lease.
type report struct {
	// ID is the replica's identity (Election.Identity).
	ID string `json:"id"`
	// Ask is the instances the replica's pool asks for.
	Ask int `json:"ask"`
	// Pods are the pods its instances hold, by name (or address), while
	// the list is short; PodGroups lists them, grouped, when it is long
	// (podlist.go). More says the replica holds pods neither lists: the
	// list would not fit the report's budget, and the leader then lets
	// no pod go. (A tollgate before PodGroups reads only Pods.)
	Pods      []string  `json:"pods,omitempty"`
	PodGroups podGroups `json:"podGroups,omitempty"`
	More      bool      `json:"more,omitempty"`
	// Retiring, written by the leader only, are pods it is letting go: no
	// replica binds a new instance to them. RetiringGen changes whenever
	// the list does.
	Retiring    []string `json:"retiring,omitempty"`
	RetiringGen uint64   `json:"retiringGen,omitempty"`
	// Seen is the leader's retiring list this replica applies (its
	// Pods were reported after it stopped binding those pods): the
	// leader lowers replicas only once every fresh replica has seen its
	// current list.
	Seen retiringSeen `json:"seen"`
	// Beat changes at every heartbeat, so that a live replica's
	// annotation changes even when nothing else does.
	Beat uint64 `json:"beat"`
	// Load is what the replica's engines measured (total.go); nil from a
	// tollgate before it, or before its pool first decided.
	Load *replicaLoad `json:"load,omitempty"`
	// Decision, written by the leader only, is the count it decided on
	// every replica's load: the other replicas' engines follow it.
	Decision *decision `json:"decision,omitempty"`
	// Shares, written by the leader only, is its split of each pod's
	// maximum concurrency among the replicas (assign.go): every replica
	// routes by its part of it.
	Shares *assignment `json:"shares,omitempty"`
	// Applied is the leader's split this replica has routed by for
	// applyDelay (zero before it knows one): the leader raises a share
	// only once every fresh replica applies its last split. Absent from
	// a tollgate before splits.
	Applied *shareVersion `json:"applied,omitempty"`
}

// retiringSeen names one version of a leader's retiring list.
type retiringSeen struct {
	Leader string `json:"leader,omitempty"`
	Gen    uint64 `json:"gen,omitempty"`
}

// peer is another replica's last report and when this replica saw it
// change, on its own clock (no replica's clock is compared with another's).
type peer struct {
	rep  report
	held []string // every pod rep lists, plain or grouped (rep.heldPods)
	raw  string
	seen time.Time
}

// reportKey is the annotation key of identity: the prefix and the
// identity when it is a valid name part of at most 63 characters, else a
// readable prefix of it and a hash.
func reportKey(identity string) string {
	ok := len(identity) <= 63 && identity != ""
	for i, c := range identity {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' && c != '_' && c != '.' || i == 0 || i == len(identity)-1) {
			ok = false
			break
		}
	}
	if ok {
		return ReportAnnotationPrefix + identity
	}
	sum := sha256.Sum256([]byte(identity))
	var b strings.Builder
	for _, c := range identity {
		if b.Len() >= 40 {
			break
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	if b.Len() > 0 {
		b.WriteByte('-')
	}
	return ReportAnnotationPrefix + b.String() + hex.EncodeToString(sum[:8])
}

// shared reports whether this runner shares its Deployment with other
// tollgate replicas (leader election is on).
func (r *Runner) shared() bool { return r.o.Election != nil }

// Sharers implements runner.Sharer: this replica and every other whose
// report is fresh.
func (r *Runner) Sharers() int {
	if !r.shared() {
		return 1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return 1 + len(r.freshPeersLocked(time.Now()))
}

// freshPeersLocked lists the peers heard from within the lease duration;
// r.mu is held.
func (r *Runner) freshPeersLocked(now time.Time) []peer {
	var fresh []peer
	for _, p := range r.peers {
		if now.Sub(p.seen) < r.o.Election.LeaseDuration {
			fresh = append(fresh, p)
		}
	}
	return fresh
}

// peerMetricsLocked sets the peer gauges; r.mu is held.
func (r *Runner) peerMetricsLocked(now time.Time) {
	fresh := r.freshPeersLocked(now)
	r.m.peers.Set(float64(len(fresh)))
	var oldest time.Duration
	for _, p := range fresh {
		oldest = max(oldest, now.Sub(p.seen))
	}
	r.m.oldestReport.Set(oldest.Seconds())
}

// reportNow asks the report loop to publish without blocking.
func (r *Runner) reportNow() {
	select {
	case r.reportKick <- struct{}{}:
	default:
	}
}

// myReportLocked is this replica's report; r.mu is held.
func (r *Runner) myReportLocked() report {
	rep := report{ID: r.o.Election.Identity, Ask: r.live, Beat: r.beat, Seen: r.seen}
	rep.Pods, rep.PodGroups, rep.More = listPods(slices.Sorted(maps.Keys(r.bound)))
	if r.leading.Load() {
		rep.Retiring = slices.Sorted(maps.Keys(r.victims))
		rep.RetiringGen = r.retiringGen
		if d := r.freshDecisionLocked(time.Now()); d != nil {
			c := *d
			rep.Decision = &c
		}
		if a := r.plan.Pub; a != nil && !r.plan.TakeOver {
			rep.Shares = a
		}
	}
	applied := r.shares.applied(time.Now())
	rep.Applied = &applied
	if len(r.locals) > 0 {
		l := r.ownLoadLocked(time.Now())
		rep.Load = &l
	}
	return rep
}

// runReports watches the report Lease and publishes this replica's report
// until ctx ends, then withdraws it, so the others stop counting this
// replica at once rather than after the lease duration.
func (r *Runner) runReports(ctx context.Context) error {
	e := r.o.Election
	leases := r.o.Client.CoordinationV1().Leases(e.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", e.ReportLeaseName).String()
	inf := newInformer(r.o.Client, leases.List, leases.Watch, func(lo *metav1.ListOptions) { lo.FieldSelector = sel },
		&coordinationv1.Lease{}, cache.SharedIndexInformerOptions{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observeReports(obj, false) },
		UpdateFunc: func(_, obj any) { r.observeReports(obj, false) },
		DeleteFunc: func(obj any) { r.observeReports(obj, true) },
	}); err != nil {
		return fmt.Errorf("kube %s: watching the report Lease: %w", r.o.Target, err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		r.m.apiErrors.WithLabelValues("watch_report").Inc()
		cache.DefaultWatchErrorHandler(ctx, nil, err)
	}); err != nil {
		return fmt.Errorf("kube %s: watching the report Lease: %w", r.o.Target, err)
	}
	r.mu.Lock()
	r.reportsSynced = inf.HasSynced
	r.mu.Unlock()
	informed := make(chan struct{})
	go func() {
		defer close(informed)
		inf.RunWithContext(ctx)
	}()
	defer func() { <-informed }()

	beat := time.NewTicker(e.LeaseDuration / 3)
	defer beat.Stop()
	var last, lastKey string   // the last report published, and it without its load
	var lastAt time.Time       // when
	var later <-chan time.Time // a load-only change waits for it (loadEvery)
	unlisted := false          // the last report said More
	failures := 0              // in a row
	// Failed publishes wait 250 ms doubling to 8 s, jittered so replicas
	// do not retry in step.
	backoff := retry.Exponential{Unit: 250 * time.Millisecond, Max: 8 * time.Second}
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for {
		r.mu.Lock()
		rep, holds := r.myReportLocked(), len(r.bound)
		if r.forceReport {
			r.forceReport, last, lastKey = false, "", ""
		}
		var applyDue <-chan time.Time // this replica will have applied the split it adopted
		if due := r.shares.due(); !due.IsZero() {
			applyDue = time.After(max(time.Until(due), 0))
		}
		r.mu.Unlock()
		if rep.More != unlisted {
			unlisted = rep.More
			if unlisted {
				r.log.Warn("this replica holds more pods than its report can list (about 1,500); the leader lets no ready pod go until it holds fewer", "pods", holds)
			} else {
				r.log.Info("this replica's report lists every pod it holds again")
			}
		}
		b, err := json.Marshal(rep)
		if err != nil {
			return fmt.Errorf("kube %s: encoding the replica report: %w", r.o.Target, err)
		}
		key, err := withoutLoad(rep)
		if err != nil {
			return fmt.Errorf("kube %s: encoding the replica report: %w", r.o.Target, err)
		}
		wait := time.Duration(0)
		if string(b) != last && string(key) == lastKey {
			wait = loadEvery - time.Since(lastAt)
		}
		if wait > 0 {
			if later == nil {
				later = time.After(wait)
			}
		} else if string(b) != last {
			later = nil
			if err := r.publish(ctx, string(b)); err != nil {
				if ctx.Err() != nil {
					break
				}
				r.m.apiErrors.WithLabelValues("patch_report").Inc()
				// Said once per run of failures; retried with backoff
				// so a missing permission neither floods the log nor
				// the API server.
				switch {
				case failures > 0:
				case apierrors.IsInvalid(err):
					r.log.Error("the API server refused this replica's report: the report Lease's annotations together passed Kubernetes' 256 KiB (each replica's report is at most about 16 KiB, so about 16 replicas fit)",
						"lease", e.Namespace+"/"+e.ReportLeaseName, "error", err)
				case apierrors.IsForbidden(err):
					r.log.Error("not allowed to publish this replica's report: the Role needs get, list, watch and patch on this Lease, and create on leases (deploy/kubernetes/base/rbac.yaml); until then the leader does not count this replica",
						"lease", e.Namespace+"/"+e.ReportLeaseName, "error", err)
				default:
					r.log.Warn("could not publish this replica's report; the leader does not count this replica until it can", "lease", e.Namespace+"/"+e.ReportLeaseName, "error", err)
				}
				delay := backoff.Delay(failures, 0, rnd)
				failures++
				select {
				case <-ctx.Done():
				case <-time.After(delay):
				}
				continue
			}
			if failures > 0 {
				r.log.Info("replica report published again", "after_failures", failures)
				failures = 0
			}
			last, lastKey, lastAt = string(b), string(key), time.Now()
			r.m.sent.Inc()
		}
		select {
		case <-ctx.Done():
		case <-r.reportKick:
			continue
		case <-later:
			later = nil
			continue
		case <-applyDue:
			r.mu.Lock()
			r.planSharesLocked(time.Now()) // leading: its own apply may let a raise go
			r.mu.Unlock()
			continue
		case <-beat.C:
			r.mu.Lock()
			r.beat++
			r.peerMetricsLocked(time.Now())
			r.mu.Unlock()
			r.forgetGone(ctx)
			r.poke() // peers may have gone stale: the leader rereads the asks
			continue
		}
		break
	}
	// Withdraw: the others stop counting this replica now.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.patchReport(wctx, r.reportKey, nil); err != nil && !apierrors.IsNotFound(err) {
		r.log.Warn("could not withdraw this replica's report; the others stop counting it after the lease duration", "error", err)
	}
	return nil
}

// publish writes this replica's annotation, creating the report Lease
// when it does not exist yet.
func (r *Runner) publish(ctx context.Context, value string) error {
	err := r.patchReport(ctx, r.reportKey, &value)
	if !apierrors.IsNotFound(err) {
		return err
	}
	e := r.o.Election
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: e.ReportLeaseName, Namespace: e.Namespace,
		Annotations: map[string]string{r.reportKey: value},
	}}
	_, err = r.o.Client.CoordinationV1().Leases(e.Namespace).Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // another replica created it first
		return r.patchReport(ctx, r.reportKey, &value)
	}
	return err
}

// patchReport sets (value non-nil) or removes one annotation of the report
// Lease with a JSON merge patch, which touches that key only, so replicas
// never conflict with one another.
func (r *Runner) patchReport(ctx context.Context, key string, value *string) error {
	v := "null"
	if value != nil {
		b, _ := json.Marshal(*value) // a string always encodes
		v = string(b)
	}
	k, _ := json.Marshal(key)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%s:%s}}}`, k, v)
	e := r.o.Election
	_, err := r.o.Client.CoordinationV1().Leases(e.Namespace).Patch(ctx, e.ReportLeaseName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// forgetGone removes, while leading, the annotations of replicas not
// heard from for four lease durations (killed without withdrawing), so
// the report Lease does not grow with every replica that ever ran.
func (r *Runner) forgetGone(ctx context.Context) {
	if !r.leading.Load() {
		return
	}
	now := time.Now()
	r.mu.Lock()
	var gone []string
	for key, p := range r.peers {
		if now.Sub(p.seen) > 4*r.o.Election.LeaseDuration {
			gone = append(gone, key)
		}
	}
	r.mu.Unlock()
	for _, key := range gone {
		if err := r.patchReport(ctx, key, nil); err == nil || apierrors.IsNotFound(err) {
			r.log.Info("forgot a replica not heard from", "report", key)
		}
	}
}

// observeReports takes the report Lease's annotations as the peers'
// reports, notes which changed, applies the current leader's retiring
// list, and wakes the scale loop. Another Lease (a client that ignores the
// field selector) is ignored. When the report Lease is deleted the peers
// are kept (they protect the pods they hold until forgotten) and every
// replica publishes again.
func (r *Runner) observeReports(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Name != r.o.Election.ReportLeaseName {
		return
	}
	now := time.Now()
	r.mu.Lock()
	if deleted {
		r.forceReport = true
		r.mu.Unlock()
		r.reportNow()
		return
	}
	before := len(r.peers)
	seen := map[string]bool{}
	wake := false // a report changed in more than its load
	for key, raw := range l.Annotations {
		if !strings.HasPrefix(key, ReportAnnotationPrefix) || key == r.reportKey {
			continue
		}
		seen[key] = true
		if p, ok := r.peers[key]; ok && p.raw == raw {
			continue
		}
		var rep report
		if err := json.Unmarshal([]byte(raw), &rep); err != nil {
			if r.badReports[key] != raw {
				r.badReports[key] = raw
				r.log.Warn("ignoring an unreadable replica report", "report", key, "error", err)
			}
			continue
		}
		delete(r.badReports, key)
		if p, ok := r.peers[key]; !ok || !sameButLoad(p.rep, rep) {
			wake = true
		}
		r.peers[key] = peer{rep: rep, held: rep.heldPods(), raw: raw, seen: now}
		r.m.received.Inc()
	}
	for key := range r.peers {
		if !seen[key] {
			delete(r.peers, key)
			wake = true
		}
	}
	for key := range r.badReports {
		if !seen[key] {
			delete(r.badReports, key)
		}
	}
	r.applyRetiringLocked()
	r.planSharesLocked(now) // leading: a replica's apply may let a raise go
	r.peerMetricsLocked(now)
	if len(r.peers) != before {
		r.log.Info("tollgate replicas sharing the Deployment", "replicas", 1+len(r.peers))
	}
	r.mu.Unlock()
	if wake {
		// A load alone does not wake the scale loop: the leader decides
		// on it at its next once-a-second decision (decide.go).
		r.poke()
	}
}
