package pool

import "time"

// rollout starts a new revision for svc, the latest, with as many
// instances as the serving revisions' load calls for (their
// recommendations) times the share that follows the latest revision, at
// least one when that share is not 0; once they are ready (or after
// RolloutTimeout) it becomes the latest ready revision, traffic is
// rerouted and the revisions left without traffic drain. A traffic block
// naming the new revision with a share moves then too, not before its
// instances are ready; p.mu is held.
func (p *Pool) rollout(svc *service, s ServiceSpec) error {
	old := svc.cur.Load()
	load := 0 // instances serving the untagged requests now
	for rv, pct := range svc.routedShares() {
		if pct > 0 {
			load += rv.serving()
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
	warm := 0
	if share := latestShare(svc.traffic) + named; share > 0 {
		warm = max(1, (load*share+99)/100)
	}
	cfg := s.Engine
	boot := cfg
	boot.MinInstances = max(cfg.MinInstances, min(warm, maxInstances(cfg)))
	rv, err := p.newRevision(svc, s, boot, name)
	if err != nil {
		return err
	}
	svc.latest = rv
	svc.revs = append(svc.revs, rv)
	if p.ctx == nil { // not running yet: nothing to warm up
		svc.cur.Store(rv)
		p.reroute(svc)
		return nil
	}
	p.log.Info("new revision: starting instances before moving traffic", "service", svc.name, "revision", rv.name, "instances", boot.MinInstances, "previous", old.name)
	p.start(rv)
	if named == 0 {
		p.reroute(svc) // its tags reach it at once
	}
	ctx := p.ctx
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		deadline := time.Now().Add(p.rolloutTimeout)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for rv.readyCount() < boot.MinInstances && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return
			case <-rv.finished: // retired: replaced again, or removed
				return
			case <-t.C:
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.services[svc.name] != svc || svc.latest != rv {
			return // replaced again meanwhile, or removed: reroute retires it
		}
		prev := svc.cur.Load()
		svc.cur.Store(rv)
		if latestShare(svc.traffic) == 100 {
			// The new revision takes all the load: it decides from the
			// load it takes over, not from windows that saw none (its
			// count fell to 1 once its boot minimum was lifted, then
			// climbed back).
			now := time.Now()
			prev.mu.Lock()
			hist := prev.eng.History(now)
			prev.mu.Unlock()
			rv.mu.Lock()
			rv.eng.Seed(now, hist)
			rv.mu.Unlock()
		}
		p.reroute(svc)
		if ready := rv.readyCount(); ready < boot.MinInstances {
			p.log.Warn("the new revision takes its traffic before it has the instances its share needs: they were not ready within the rollout timeout",
				"service", svc.name, "revision", rv.name, "needed", boot.MinInstances, "ready", ready, "rollout_timeout", p.rolloutTimeout, "previous", prev.name)
		} else {
			p.log.Info("the new revision is the latest ready; traffic rerouted", "service", svc.name, "revision", rv.name, "needed", boot.MinInstances, "ready", ready, "previous", prev.name)
		}
		if err := rv.setConfig(svc.spec.Engine, svc.spec.limits()); err != nil {
			p.log.Error("new revision refused its config", "service", svc.name, "error", err)
		}
	}()
	return nil
}

// latestShare is the percent of untagged requests that follows the latest
// ready revision under traffic t.
func latestShare(t []TrafficTarget) int {
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
