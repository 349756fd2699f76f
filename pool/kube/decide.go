package kube

// This file is the runner's side of total.go: the runner.LoadSharer the
// pool finds on a runner with Options.Election, the engines' policy that
// records this replica's load and answers with the leader's count, and
// the share of each pod this replica routes by.

import (
	"encoding/json"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/runner"
)

var _ runner.LoadSharer = (*Runner)(nil)

// localStale is how long an engine's last recorded load counts in this
// replica's report: the pool decides once a second, so an engine not
// heard from for longer has gone (its revision retired, or the policy
// replaced when the share changed).
const localStale = 3 * time.Second

// loadEvery is the least time between two reports that differ only by
// their load, which changes every second under traffic: at most one
// patch of the report Lease a second per replica.
const loadEvery = time.Second

// localLoad is one engine's last metrics.
type localLoad struct {
	load replicaLoad
	cfg  autoscale.Config // the revision's configured config (the whole max concurrency)
	at   time.Time
}

// sharedPolicy is the policy of one revision's engine on a shared
// Deployment (runner.LoadSharer.SharedPolicy).
type sharedPolicy struct {
	r     *Runner
	key   string
	cfg   autoscale.Config
	share int
	local autoscale.Policy
	basis runner.Basis // the last Recommend's; its revision's lock guards both
}

var _ runner.BasisPolicy = (*sharedPolicy)(nil)

// Recommend records this replica's metrics for its report and returns the
// service's count: the leader's decision on every replica's load (made
// here when this replica leads), or, while none is known, what this
// replica needs on its own share (local).
func (p *sharedPolicy) Recommend(m autoscale.Metrics) autoscale.Recommendation {
	own := p.local.Recommend(m)
	if d, ok := p.r.recommend(p.key, p.cfg, loadOf(m, p.share), m.Now); ok {
		p.basis = runner.Basis{Service: true, NeedCPU: d.NeedCPU, NeedConcurrency: d.NeedConcurrency, NeedACT: d.NeedACT, InFlight: d.InFlight}
		return autoscale.Recommendation{Count: d.Count, Driver: d.Driver, Held: d.Held}
	}
	p.basis = runner.Basis{}
	return own
}

// Basis implements runner.BasisPolicy: whether the last count was the
// service's, and the needs it was decided on.
func (p *sharedPolicy) Basis() runner.Basis { return p.basis }

// SharedPolicy implements runner.LoadSharer. key names the engine within
// this replica only (the pool's service/revision): what replicas
// exchange is per Deployment, one report per replica on this runner's
// report Lease (tollgate-<deployment>-replicas), with the loads of every
// engine of this replica on the Deployment merged; so the leader of each
// Deployment sums that Deployment's load over the replicas whatever the
// revisions are named, and with bound revisions (pool.BoundRevision) the
// names agree on every replica too.
func (r *Runner) SharedPolicy(key string, cfg autoscale.Config, share int, local autoscale.Policy) autoscale.Policy {
	if !r.shared() {
		return local
	}
	return &sharedPolicy{r: r, key: key, cfg: cfg, share: share, local: local}
}

// Share implements runner.LoadSharer: this replica's part of
// maxConcurrency under the leader's split (assign.go), which every
// replica applies alike, so that the shares of the replicas in it never
// sum above maxConcurrency, even while the split changes (the leader
// lowers shares before it raises any). Before this replica knows a split
// (no leader has published one: it starts, or the leader is a tollgate
// before splits) the split is even over the fresh replicas,
// max(1, maxConcurrency/n). It keeps the last split it knew while there
// is no newer one (a leader of an earlier release); it has one request
// per pod while a split does not name it yet (it has just joined), before
// it has read the report Lease, and while it has not heard from the
// leader for two thirds of the lease duration (a heartbeat missed) (the leader may be gone, or this
// replica cut off: the leader reassigns a replica's share once it has not
// heard from it for the lease duration).
func (r *Runner) Share(maxConcurrency int) int {
	if !r.shared() {
		return maxConcurrency
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reportsSynced() {
		return 1 // it does not know yet who else sends to the pods
	}
	if a := r.shares.Cur; a != nil {
		if !r.leading.Load() {
			if p, _ := r.leaderPeerLocked(now); p.rep.ID == "" || now.Sub(p.seen) >= 2*r.o.Election.LeaseDuration/3 {
				return 1 // the leader may give this share away: it stops counting this replica a lease duration after its last report
			}
		}
		return min(a.share(r.o.Election.Identity, maxConcurrency), maxConcurrency)
	}
	return max(1, maxConcurrency/(1+len(r.freshPeersLocked(now))))
}

// adoptSharesLocked routes by the current leader's split when another
// replica leads and its report holds a valid one; r.mu is held.
func (r *Runner) adoptSharesLocked(now time.Time) {
	if r.leading.Load() || r.leaderID == "" || r.leaderID == r.o.Election.Identity {
		return
	}
	for _, p := range r.peers {
		if p.rep.ID == r.leaderID {
			if p.rep.Shares.valid() && r.shares.adopt(p.rep.Shares, now) {
				r.reportNow() // the report loop waits for it to be applied
			}
			return
		}
	}
}

// planSharesLocked moves the leader's split one step (sharePlan.next) on
// every replica's reported load, its own as it reports it, and routes by
// what it publishes; r.mu is held. Not leading, it does nothing.
func (r *Runner) planSharesLocked(now time.Time) {
	if !r.shared() || !r.leading.Load() {
		return
	}
	self := r.o.Election.Identity
	applied := r.shares.applied(now)
	members := []shareMember{{ID: self, Weight: r.ownLoadLocked(now).weight(), HasLoad: true, Applied: &applied, Seen: now}}
	for _, p := range r.peers {
		m := shareMember{ID: p.rep.ID, Applied: p.rep.Applied, Seen: p.seen}
		if p.rep.Load != nil {
			m.Weight, m.HasLoad = p.rep.Load.clean().weight(), true
		}
		members = append(members, m)
	}
	before := r.plan.Pub
	r.plan = r.plan.next(now, r.o.Election.LeaseDuration, self, members)
	if r.plan.Pub != before {
		r.shares.adopt(r.plan.Pub, now)
		r.reportNow()
	}
}

// recommend records one engine's load and returns the leader's decision:
// made now when this replica leads, else the leader's fresh report's;
// false when neither is known. r.mu is taken.
func (r *Runner) recommend(key string, cfg autoscale.Config, l replicaLoad, now time.Time) (decision, bool) {
	if !r.shared() {
		return decision{}, false
	}
	r.mu.Lock()
	r.locals[key] = localLoad{load: l, cfg: cfg, at: now}
	var d decision
	ok := false
	changed := false
	if r.leading.Load() {
		d, changed = r.decideLocked(now, cfg)
		ok = true
		r.planSharesLocked(now)
	} else if p, fresh := r.leaderPeerLocked(now); fresh && p.rep.Decision != nil {
		d, ok = p.rep.Decision.clean(), true
		// Should this replica lead next, it holds the count from there
		// (the recommender keeps a count within tolerance of the need).
		r.total.current = d.Count
	}
	r.mu.Unlock()
	r.reportNow()
	if changed {
		r.poke() // the scale loop writes the new count
	}
	return d, ok
}

// decideLocked makes the leader's decision at now on its own load and
// every fresh replica's, with cfg (the caller's revision's), and keeps
// it for the report and the scale loop; changed says the count differs
// from the last one. r.mu is held.
func (r *Runner) decideLocked(now time.Time, cfg autoscale.Config) (decision, bool) {
	loads := []reported{{load: r.ownLoadLocked(now), seen: now}}
	for _, p := range r.peers {
		if p.rep.Load != nil {
			loads = append(loads, reported{load: *p.rep.Load, seen: p.seen})
		}
	}
	before := r.decided
	rec, m := r.total.decide(now, cfg, loads, r.o.Election.LeaseDuration)
	cpu, conc, act := autoscale.NewCloudRun(cfg.WithDefaults()).Needs(m)
	d := decision{Count: rec.Count, Driver: rec.Driver, Held: rec.Held,
		NeedCPU: round3(cpu), NeedConcurrency: round3(conc), NeedACT: round3(act), InFlight: m.Active}
	r.decided, r.decidedAt = &d, now
	r.m.decided.Set(float64(d.Count))
	changed := before == nil || before.Count != d.Count
	if changed {
		from := 0
		if before != nil {
			from = before.Count
		}
		r.log.Info("service count from every replica's load", "from", from, "to", d.Count, "driver", d.Driver.String(),
			"replicas", len(loads), "concurrency_1m", round3(m.Concurrency1m), "concurrency_6s", round3(m.Concurrency6s),
			"cpu_1m", round3(m.CPU1m), "act_capacity", round3(m.ACTCapacity), "in_flight", m.Active)
	}
	return d, changed
}

// freshDecisionLocked is this replica's last decision while it is fresh
// (it leads and decided within the lease duration), else nil; r.mu is
// held.
func (r *Runner) freshDecisionLocked(now time.Time) *decision {
	if !r.leading.Load() || r.decided == nil || now.Sub(r.decidedAt) >= r.o.Election.LeaseDuration {
		return nil
	}
	return r.decided
}

// decidedLocked is the count of freshDecisionLocked, 0 without one; r.mu
// is held.
func (r *Runner) decidedLocked(now time.Time) int {
	if d := r.freshDecisionLocked(now); d != nil {
		return d.Count
	}
	return 0
}

// ownLoadLocked is this replica's load: its engines' fresh loads merged;
// stale ones are forgotten. r.mu is held.
func (r *Runner) ownLoadLocked(now time.Time) replicaLoad {
	var ls []replicaLoad
	for key, l := range r.locals {
		if now.Sub(l.at) >= localStale {
			delete(r.locals, key)
			continue
		}
		ls = append(ls, l.load)
	}
	return merge(ls)
}

// leaderPeerLocked is the current leader's report when another replica
// leads, and whether it is fresh; r.mu is held.
func (r *Runner) leaderPeerLocked(now time.Time) (peer, bool) {
	if r.leaderID == "" || r.leaderID == r.o.Election.Identity {
		return peer{}, false
	}
	for _, p := range r.peers {
		if p.rep.ID == r.leaderID {
			return p, now.Sub(p.seen) < r.o.Election.LeaseDuration
		}
	}
	return peer{}, false
}

// withoutLoad is rep's encoding without its load, which changes every
// second under traffic: a change of anything else is published at once.
func withoutLoad(rep report) ([]byte, error) {
	rep.Load = nil
	return json.Marshal(rep)
}

// sameButLoad reports whether a and b differ at most by their load.
func sameButLoad(a, b report) bool {
	x, errX := withoutLoad(a)
	y, errY := withoutLoad(b)
	return errX == nil && errY == nil && string(x) == string(y)
}

// setLeader records the Lease holder's identity (leader election's
// OnNewLeader): only its retiring list counts.
func (r *Runner) setLeader(id string) {
	r.mu.Lock()
	r.leaderID = id
	r.applyRetiringLocked()
	r.mu.Unlock()
	r.poke()
}

// applyRetiringLocked takes the current leader's retiring list (none when
// this replica leads, or the leader has not reported) as the pods not to
// bind, and notes which version of it this replica applies; r.mu is held.
func (r *Runner) applyRetiringLocked() {
	retiring := map[string]bool{}
	seen := retiringSeen{}
	if r.leaderID != "" && r.leaderID != r.o.Election.Identity {
		for _, p := range r.peers {
			if p.rep.ID == r.leaderID {
				for _, pod := range p.rep.Retiring {
					retiring[pod] = true
				}
				seen = retiringSeen{Leader: p.rep.ID, Gen: p.rep.RetiringGen}
				break
			}
		}
	}
	r.peerRetiring = retiring
	r.bindLocked() // pods no longer retiring may be taken
	r.adoptSharesLocked(time.Now())
	if seen != r.seen {
		r.seen = seen
		r.reportNow()
	}
}
