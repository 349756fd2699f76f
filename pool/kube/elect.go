package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// elect campaigns for the Lease until ctx ends; each time it leads, the
// scale loop runs in this goroutine (not in the elector's), so that it
// has returned before elect does.
func (r *Runner) elect(ctx context.Context) error {
	e := r.o.Election
	terms := make(chan context.Context)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: e.LeaseName, Namespace: e.Namespace},
		Client:     r.o.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          r.o.Target.String(),
		LeaseDuration: e.LeaseDuration,
		RenewDeadline: e.RenewDeadline,
		RetryPeriod:   e.RetryPeriod,
		// The scale loop ends with the same context as the renewal: the
		// Lease is released only once no write can follow.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				select {
				case terms <- lctx:
				case <-lctx.Done():
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				r.log.Info("scale leader", "lease", e.Namespace+"/"+e.LeaseName, "leader", id, "self", id == e.Identity)
				r.setLeader(id)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("kube %s: leader election: %w", r.o.Target, err)
	}
	elector := make(chan struct{})
	go func() {
		defer close(elector)
		for ctx.Err() == nil {
			le.Run(ctx) // returns when leadership is lost; campaign again
		}
	}()
	for {
		select {
		case lctx := <-terms:
			r.log.Info("leading: writing replicas")
			r.lead(lctx)
			r.log.Info("stopped leading: replicas left to the new leader")
		case <-elector:
			return nil
		}
	}
}
