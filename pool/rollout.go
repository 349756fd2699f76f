package pool

import (
	"fmt"
	"slices"
	"time"

	"github.com/tollgate/tollgate/pool/revision"
	"github.com/tollgate/tollgate/pool/traffic"
)

// rollout starts a new revision for svc, the latest, with as many
// instances as the serving revisions' load calls for (their
// recommendations) times the share that follows the latest revision, at
// least one whatever that share (as Knative's initial scale: a revision
// shows it can run before it is ready); once they are ready, or at the
// rollout timeout if at least one is, it becomes the latest ready
// revision, traffic is rerouted and the revisions left without traffic
// drain. A traffic block naming the new revision with a share moves then
// too, not before its instances are ready. A revision with no instance
// ready at the rollout timeout has failed, as on Cloud Run: traffic stays
// where it was (prev is the block in force before this reload, restored
// when the new block named the revision), the log, the admin API
// (RevisionStatus.State) and tollgate_pool_rollouts_total say so, and it
// keeps no instance beyond its min instances; p.mu is held.
func (p *Pool) rollout(svc *service, s ServiceSpec, prev []traffic.Target) error {
	old := svc.cur.Load()
	load := 0 // instances serving the untagged requests now
	for rv, pct := range svc.routedShares() {
		if pct > 0 {
			load += rv.Serving()
		}
	}
	// Its share: the latest's, and any entry naming it.
	name := svc.nextName(s)
	named := 0
	for _, e := range svc.traffic {
		if e.RevisionName == name {
			named += e.Percent
		}
	}
	warm := 1
	if share := latestShare(svc.traffic) + named; share > 0 {
		warm = max(1, (load*share+99)/100)
	}
	cfg := s.Engine
	boot := cfg
	boot.MinInstances = max(cfg.MinInstances, min(warm, cfg.WithDefaults().MaxInstances))
	rv, err := p.newRevision(svc, s, boot, name)
	if err != nil {
		return err
	}
	svc.latest = rv
	svc.revs = append(svc.revs, rv)
	// p.mu is held.
	rv.deploying = p.ctx != nil
	if p.ctx == nil { // not running yet: nothing to warm up
		svc.cur.Store(rv)
		p.reroute(svc)
		return nil
	}
	timeout := s.rolloutTimeout(p.rolloutTimeout)
	p.log.Info("new revision: starting instances before moving traffic", "service", svc.name, "revision", rv.Name(),
		"instances", boot.MinInstances, "previous", old.Name(), "rollout_timeout", timeout)
	p.start(rv)
	if named == 0 {
		p.reroute(svc) // its tags reach it at once
	}
	ctx := p.ctx
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		deadline := time.Now().Add(timeout)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for rv.ReadyCount() < boot.MinInstances && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return
			case <-rv.Done(): // retired: replaced again, or removed
				return
			case <-t.C:
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		rv.deploying = false
		if p.services[svc.name] != svc || svc.latest != rv {
			return // replaced again meanwhile, or removed: reroute retires it
		}
		ready := rv.ReadyCount()
		if ready == 0 {
			p.failRollout(svc, rv, prev, named > 0, timeout)
			return
		}
		before := svc.cur.Load()
		svc.cur.Store(rv)
		if latestShare(svc.traffic) == 100 {
			// The new revision takes all the load: it decides from the
			// load it takes over, not from windows that saw none (its
			// count fell to 1 once its boot minimum was lifted, then
			// climbed back).
			carryHistory(rv, []*rev{before})
		}
		p.reroute(svc)
		if ready < boot.MinInstances {
			rv.NoteRollout(revision.RolloutShort)
			p.log.Warn("the new revision takes its traffic before it has the instances its share needs: they were not ready within the rollout timeout",
				"service", svc.name, "revision", rv.Name(), "needed", boot.MinInstances, "ready", ready, "rollout_timeout", timeout, "previous", before.Name())
		} else {
			rv.NoteRollout(revision.RolloutReady)
			p.log.Info("the new revision is the latest ready; traffic rerouted", "service", svc.name, "revision", rv.Name(), "needed", boot.MinInstances, "ready", ready, "previous", before.Name())
		}
		if err := rv.SetConfig(svc.spec.Engine, svc.spec.limits()); err != nil {
			p.log.Error("new revision refused its config", "service", svc.name, "error", err)
		}
	}()
	return nil
}

// failRollout leaves svc's traffic where it was after its latest
// revision rv had no ready instance within the rollout timeout: rv stays
// the latest (the template) but not the latest ready, its boot minimum
// is lifted, and when the reload's traffic block named it (restore) the
// block in force before, prev, is restored; p.mu is held.
func (p *Pool) failRollout(svc *service, rv *rev, prev []traffic.Target, restore bool, timeout time.Duration) {
	why := notReadyReason(rv)
	rv.failed = fmt.Sprintf("no instance ready within the rollout timeout (%v): %s", timeout, why)
	if restore {
		svc.traffic = slices.Clone(prev)
	}
	p.reroute(svc)
	rv.NoteRollout(revision.RolloutFailed)
	p.log.Error("rollout failed: the new revision had no instance ready within the rollout timeout; traffic stays where it was",
		"service", svc.name, "revision", rv.Name(), "serving", svc.cur.Load().Name(), "rollout_timeout", timeout,
		"reason", why, "traffic", trafficString(svc.traffic))
	if err := rv.SetConfig(svc.spec.Engine, svc.spec.limits()); err != nil {
		p.log.Error("new revision refused its config", "service", svc.name, "error", err)
	}
}

// latestShare is the percent of untagged requests that follows the latest
// ready revision under traffic t.
func latestShare(t []traffic.Target) int {
	if len(t) == 0 {
		return 100
	}
	n := 0
	for _, e := range t {
		if e.LatestRevision {
			n += e.Percent
		}
	}
	return n
}
