package kube

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// elect campaigns for the Lease until ctx ends; each time it leads, the
// scale loop runs in this goroutine, and the Lease is released only once
// the loop has returned, so no write follows the release.
//
// The protocol is client-go's leaderelection with a LeaseLock and
// ReleaseOnCancel (same Lease fields, timings and takeover rule), so
// tollgate replicas of either implementation share a Lease; it is written
// here because client-go's package links the generated clientset.
func (r *Runner) elect(ctx context.Context) error {
	l := &elector{c: r.o.Client, e: r.o.Election, r: r}
	for {
		if !l.acquire(ctx) {
			return nil // ctx ended
		}
		lctx, cancel := context.WithCancel(ctx)
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			defer cancel() // a failed renewal ends the term
			l.renew(lctx)
		}()
		r.log.Info("leading: writing replicas")
		r.lead(lctx)
		r.log.Info("stopped leading: replicas left to the new leader")
		cancel()
		<-renewed
		l.release()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// record is what a Lease says of its holder (client-go's
// LeaderElectionRecord).
type record struct {
	holder          string
	durationSeconds int
	acquire, renew  time.Time
	transitions     int
}

func recordOf(s *coordinationv1.LeaseSpec) record {
	var rec record
	if s.HolderIdentity != nil {
		rec.holder = *s.HolderIdentity
	}
	if s.LeaseDurationSeconds != nil {
		rec.durationSeconds = int(*s.LeaseDurationSeconds)
	}
	if s.LeaseTransitions != nil {
		rec.transitions = int(*s.LeaseTransitions)
	}
	if s.AcquireTime != nil {
		rec.acquire = s.AcquireTime.Time
	}
	if s.RenewTime != nil {
		rec.renew = s.RenewTime.Time
	}
	return rec
}

func (rec record) spec() coordinationv1.LeaseSpec {
	holder := rec.holder
	d, n := int32(rec.durationSeconds), int32(rec.transitions)
	return coordinationv1.LeaseSpec{
		HolderIdentity:       &holder,
		LeaseDurationSeconds: &d,
		AcquireTime:          &metav1.MicroTime{Time: rec.acquire},
		RenewTime:            &metav1.MicroTime{Time: rec.renew},
		LeaseTransitions:     &n,
	}
}

func (rec record) equal(o record) bool {
	return rec.holder == o.holder && rec.durationSeconds == o.durationSeconds && rec.transitions == o.transitions &&
		rec.acquire.Equal(o.acquire) && rec.renew.Equal(o.renew)
}

// elector holds one replica's view of the Lease; used by one goroutine
// at a time (elect's, then renew's while leading, then elect's).
type elector struct {
	c Client
	e *Election
	r *Runner

	lease      *coordinationv1.Lease // last read or written
	observed   record
	observedAt time.Time
	reported   string
	said       bool
}

func (l *elector) leader() bool { return l.observed.holder == l.e.Identity }

func (l *elector) valid(now time.Time) bool {
	return l.observedAt.Add(time.Duration(l.observed.durationSeconds) * time.Second).After(now)
}

func (l *elector) observe(rec record) {
	l.observed, l.observedAt = rec, time.Now()
}

// report logs a change of holder.
func (l *elector) report() {
	if l.said && l.observed.holder == l.reported {
		return
	}
	l.said, l.reported = true, l.observed.holder
	l.r.log.Info("scale leader", "lease", l.e.Namespace+"/"+l.e.LeaseName, "leader", l.reported, "self", l.reported == l.e.Identity)
}

// acquire tries every RetryPeriod (jittered, as client-go) until it
// holds the Lease (true) or ctx ends (false).
func (l *elector) acquire(ctx context.Context) bool {
	for {
		ok := l.tryAcquireOrRenew(ctx)
		l.report()
		if ok {
			return true
		}
		wait := l.e.RetryPeriod + time.Duration(rand.Float64()*1.2*float64(l.e.RetryPeriod))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// renew renews the Lease every RetryPeriod until ctx ends or a renewal
// does not succeed within RenewDeadline.
func (l *elector) renew(ctx context.Context) {
	for {
		if !l.renewOnce(ctx) {
			l.report()
			if ctx.Err() == nil {
				l.r.log.Info("failed to renew the lease", "lease", l.e.Namespace+"/"+l.e.LeaseName)
			}
			return
		}
		l.report()
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.e.RetryPeriod):
		}
	}
}

func (l *elector) renewOnce(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, l.e.RenewDeadline)
	defer cancel()
	for {
		if l.tryAcquireOrRenew(ctx) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(l.e.RetryPeriod):
		}
	}
}

// tryAcquireOrRenew is client-go's: renew optimistically while the
// observed lease is ours and valid; else read it, and take it if nobody
// holds it or its holder has not renewed it within its duration as
// observed here (no clock is compared across replicas).
func (l *elector) tryAcquireOrRenew(ctx context.Context) bool {
	now := time.Now()
	rec := record{holder: l.e.Identity, durationSeconds: int(l.e.LeaseDuration / time.Second), acquire: now, renew: now}
	if l.leader() && l.valid(now) && l.lease != nil {
		rec.acquire, rec.transitions = l.observed.acquire, l.observed.transitions
		if l.update(ctx, rec) == nil {
			l.observe(rec)
			return true
		}
	}
	old, err := l.c.GetLease(ctx, l.e.Namespace, l.e.LeaseName)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			l.r.log.Debug("cannot read the lease", "error", err)
			return false
		}
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.e.LeaseName, Namespace: l.e.Namespace},
			Spec:       rec.spec(),
		}
		created, err := l.c.CreateLease(ctx, lease)
		if err != nil {
			l.r.log.Debug("cannot create the lease", "error", err)
			return false
		}
		l.lease = created
		l.observe(rec)
		return true
	}
	l.lease = old
	if o := recordOf(&old.Spec); !o.equal(l.observed) {
		l.observe(o)
	}
	if l.observed.holder != "" && l.valid(now) && !l.leader() {
		return false
	}
	if l.leader() {
		rec.acquire, rec.transitions = l.observed.acquire, l.observed.transitions
	} else {
		rec.transitions = l.observed.transitions + 1
	}
	if err := l.update(ctx, rec); err != nil {
		l.r.log.Debug("cannot update the lease", "error", err)
		return false
	}
	l.observe(rec)
	return true
}

func (l *elector) update(ctx context.Context, rec record) error {
	next := l.lease.DeepCopy()
	next.Spec = rec.spec()
	updated, err := l.c.UpdateLease(ctx, next)
	if err != nil {
		return fmt.Errorf("updating lease %s/%s: %w", l.e.Namespace, l.e.LeaseName, err)
	}
	l.lease = updated
	return nil
}

// release gives the Lease up (no holder, a one-second duration) if this
// replica holds it, so that another takes over within its retry period;
// bounded by RenewDeadline.
func (l *elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), l.e.RenewDeadline)
	defer cancel()
	for ctx.Err() == nil {
		old, err := l.c.GetLease(ctx, l.e.Namespace, l.e.LeaseName)
		if err != nil {
			l.r.log.Debug("cannot read the lease to release it", "error", err)
			return
		}
		if !l.leader() {
			return
		}
		l.lease = old
		now := time.Now()
		rec := record{durationSeconds: 1, acquire: now, renew: now, transitions: recordOf(&old.Spec).transitions}
		err = l.update(ctx, rec)
		if err == nil {
			l.observe(rec)
			l.report()
			return
		}
		if !apierrors.IsConflict(err) {
			l.r.log.Warn("could not release the lease", "error", err)
			return
		}
	}
}
