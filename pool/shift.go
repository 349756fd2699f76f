package pool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/pool/revision"
	"github.com/tollgate/tollgate/pool/traffic"
)

// A traffic change that gives a revision a larger share of the untagged
// requests (through Apply or SetTraffic) is a warm rollout: the
// receiving revisions are first started up to the instances their new
// shares need, from the load the revisions serving now carry, and the
// split moves once those are ready, or after the rollout timeout (said
// in the log). A revision left without a share or a tag drains by its
// requests (reroute).
//
// The warm-up is asked of the runner only by starting instances: the
// floor raises the engine's minimum (Revision.SetFloor), and the engine
// starts instances up to it. On Kubernetes with leader election
// (pool/kube's Options.Election: several tollgate replicas, each given
// the same config and so the same traffic change) only the leader writes
// replicas: a follower's started instances raise its runner's ask, which
// its report on the Deployment's replicas Lease carries, and the leader
// sets replicas to the largest fresh ask when that is more than its own
// decision; the leader's decision also takes the floor as its minimum,
// since the revision's engine config hands the shared policy the
// configured config with the floor in it. A replica's floor comes from
// its serving revisions' recommended counts, which under election are
// the leader's counts for the whole service, so every replica asks for
// the new share's whole need and the Deployment gets it once; each
// replica moves its split once its own instances are bound to ready
// pods, so the replicas' splits move within about a report's round trip
// of one another.

// receiver is a revision whose share grows in a pending traffic change.
type receiver struct {
	rv       *rev
	from, to int // percents before and after
	need     int // ready instances wanted before the share moves
}

// sharesOf is the percent of untagged requests each revision takes under
// traffic t (empty: 100 % to the latest ready); p.mu is held and the
// names were checked.
func (svc *service) sharesOf(t []traffic.Target) map[*rev]int {
	if len(t) == 0 {
		t = []traffic.Target{{LatestRevision: true, Percent: 100}}
	}
	out := map[*rev]int{}
	for _, e := range t {
		rv := svc.cur.Load()
		if !e.LatestRevision {
			rv = svc.revisionByName(e.RevisionName)
		}
		out[rv] += e.Percent
	}
	return out
}

// routedShares is the percent of untagged requests each revision takes
// under the routing in force.
func (svc *service) routedShares() map[*rev]int {
	if rt := svc.route.Load(); rt != nil {
		return rt.Shares()
	}
	return map[*rev]int{}
}

// ErrNotReady is wrapped by SetTraffic's error when a revision whose
// share was to grow had no instance ready within the rollout timeout:
// the traffic stayed where it was.
var ErrNotReady = errors.New("pool: revision not ready")

// shifting is a traffic change under way: done is closed once it is in
// force, or once it failed (err, set before done is closed), or once a
// later change or the pool's end made it moot.
type shifting struct {
	done chan struct{}
	err  error
}

// shift gives svc the traffic t: at once when no revision's share grows
// beyond what its ready instances carry, else once the receiving
// revisions have the instances their shares need, or at the rollout
// timeout if each has at least one ready; a receiving revision with
// none ready then has failed, and the traffic stays where it was, as on
// Cloud Run. A revision that takes all the traffic carries the load
// history of those it takes it from, as a rollout does; p.mu is held and
// t was checked. how says where t came from, for the log.
func (p *Pool) shift(svc *service, t []traffic.Target, how string) *shifting {
	sh := &shifting{done: make(chan struct{})}
	svc.shiftGen++
	gen := svc.shiftGen
	for _, rv := range svc.revs {
		rv.SetFloor(0) // an earlier pending change's warm-up, superseded
	}
	timeout := svc.spec.rolloutTimeout(p.rolloutTimeout)
	before := svc.routedShares()
	load := 0 // instances serving the untagged requests now
	var serving []*rev
	for rv, pct := range before {
		if pct > 0 {
			load += rv.Serving()
			serving = append(serving, rv)
		}
	}
	var recv []receiver
	for rv, pct := range svc.sharesOf(t) {
		if pct <= before[rv] {
			continue
		}
		need := max(1, (load*pct+99)/100)
		need = min(need, rv.State().MaxInstances)
		recv = append(recv, receiver{rv: rv, from: before[rv], to: pct, need: need})
	}
	slices.SortFunc(recv, func(a, b receiver) int { return b.to - a.to })
	move := func(timedOut bool) {
		for _, r := range recv {
			ready := r.rv.ReadyCount()
			if ready < r.need && timedOut {
				r.rv.NoteRollout(revision.RolloutShort)
				p.log.Warn("moving traffic before the receiving revision has the instances its share needs: they were not ready within the rollout timeout",
					"service", svc.name, "revision", r.rv.Name(), "from_percent", r.from, "to_percent", r.to,
					"needed", r.need, "ready", ready, "rollout_timeout", timeout)
			} else {
				r.rv.NoteRollout(revision.RolloutReady)
				p.log.Info("receiving revision ready before its share grew",
					"service", svc.name, "revision", r.rv.Name(), "from_percent", r.from, "to_percent", r.to,
					"needed", r.need, "ready", ready, "serving_instances", load)
			}
			r.rv.failed = ""
			if r.to == 100 {
				carryHistory(r.rv, serving)
			}
		}
		svc.traffic = slices.Clone(t)
		p.reroute(svc)
		p.log.Info("traffic moved", "service", svc.name, "by", how, "traffic", trafficString(t))
		for _, r := range recv {
			r.rv.SetFloor(0)
		}
	}
	warm := false
	for _, r := range recv {
		if r.rv.ReadyCount() < r.need {
			warm = true
		}
	}
	if !warm || p.ctx == nil || p.ctx.Err() != nil {
		move(false)
		close(sh.done)
		return sh
	}
	for _, r := range recv {
		r.rv.SetFloor(r.need)
		p.log.Info("starting instances before moving traffic to a revision", "service", svc.name, "revision", r.rv.Name(),
			"from_percent", r.from, "to_percent", r.to, "needed", r.need, "ready", r.rv.ReadyCount(), "serving_instances", load,
			"rollout_timeout", timeout)
	}
	ctx := p.ctx
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(sh.done)
		deadline := time.Now().Add(timeout)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			ready := true
			for _, r := range recv {
				if r.rv.ReadyCount() < r.need {
					ready = false
				}
			}
			if ready || !time.Now().Before(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.services[svc.name] != svc || svc.shiftGen != gen {
			return // removed, or a later change took over
		}
		for _, r := range recv {
			if svc.revisionByName(r.rv.Name()) != r.rv {
				p.log.Warn("traffic change dropped: a revision it names was retired meanwhile", "service", svc.name, "revision", r.rv.Name())
				for _, r := range recv {
					r.rv.SetFloor(0)
				}
				sh.err = fmt.Errorf("%w: service %s: revision %s was retired before the traffic moved", ErrNotReady, svc.name, r.rv.Name())
				return
			}
		}
		if err := p.refuseUnready(svc, recv, t, how, timeout); err != nil {
			sh.err = err
			return
		}
		move(!time.Now().Before(deadline))
	}()
	return sh
}

// refuseUnready leaves svc's traffic where it is when a receiving
// revision has no instance ready at the rollout timeout: it says so in
// the log, tollgate_pool_rollouts_total and the revision's state, lifts
// the warm-up floors, retires the revisions brought back for t that
// nothing keeps (reroute), and returns the error, wrapping ErrNotReady;
// nil when every receiver has one; p.mu is held.
func (p *Pool) refuseUnready(svc *service, recv []receiver, t []traffic.Target, how string, timeout time.Duration) error {
	var unready []string
	for _, r := range recv {
		if r.rv.ReadyCount() > 0 {
			continue
		}
		unready = append(unready, r.rv.Name())
		why := notReadyReason(r.rv)
		r.rv.failed = fmt.Sprintf("no instance ready within the rollout timeout (%v): %s", timeout, why)
		r.rv.NoteRollout(revision.RolloutFailed)
		p.log.Error("traffic not moved: the receiving revision had no instance ready within the rollout timeout; traffic stays where it was",
			"service", svc.name, "by", how, "revision", r.rv.Name(), "from_percent", r.from, "to_percent", r.to,
			"rollout_timeout", timeout, "reason", why, "asked", trafficString(t), "traffic", trafficString(svc.traffic))
	}
	if len(unready) == 0 {
		return nil
	}
	for _, r := range recv {
		r.rv.SetFloor(0)
	}
	p.reroute(svc)
	return fmt.Errorf("%w: service %s: %s had no instance ready within the rollout timeout (%v); the traffic stays %s",
		ErrNotReady, svc.name, strings.Join(unready, ", "), timeout, trafficString(svc.traffic))
}
