package sim

// This file runs a backend's revisions as package pool runs a service's:
// traffic split by autoscale.Split, tags, new revisions rolled out warm,
// traffic changes that wait for the receiving revision's instances, and
// replaced revisions draining by their requests, over max instances, for
// at most the request timeout and 15 minutes.

import (
	"fmt"
	"slices"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// TrafficEvent is a step of a rollout or traffic change, as the pool logs
// it.
type TrafficEvent struct {
	// At is when it happened.
	At time.Duration
	// Revision is the revision it is about.
	Revision string
	// Msg says what happened.
	Msg string
	// Needed and Ready are the ready instances the revision's new share
	// needs and those it had, for a share that grew.
	Needed, Ready int
}

// receiver is a revision whose share grows in a pending traffic change.
type receiver struct {
	rev            int32
	from, to, need int
}

// svcState is the traffic side of a backend with revisions.
type svcState struct {
	name          string
	latest, ready int32 // the newest revision; the latest ready
	traffic       []TrafficTarget
	split         autoscale.Split
	targets       []int32 // the revision of each entry of the split
	keyed         autoscale.Split
	keyedTargets  []int32 // the revision of each entry of keyed: oldest first
	tags          map[string]int32
	reqs          uint64 // untagged requests, numbered from 1 as the pool's
	shift         []receiver
	shiftTo       []TrafficTarget
	shiftBy       int64 // the rollout timeout's end; 0: no change pending
	rollout       int32 // the revision rolling out, -1 for none
	boot          int   // the instances it waits for
	rolloutBy     int64
	rolloutPrev   []TrafficTarget // the block in force before the rollout's, restored if it fails
	log           []TrafficEvent
	grace         int64 // how long a retired revision may drain
	rolloutTimout int64
}

// newService sets up r's revisions: those deployed at 0 at once, the
// others and the traffic changes as events.
func (r *runner) newService() error {
	b := r.sc.Backend
	specs := b.revisionsWithDefaults()
	if !b.hasRevisions() {
		_, err := r.newRev(0, specs[0], b.Autoscale)
		return err
	}
	s := &svcState{name: b.Service, rollout: -1,
		grace:         int64(min(b.RequestTimeout, MaxOverMaxGrace)),
		rolloutTimout: int64(b.RolloutTimeout)}
	r.svc = s
	n := len(r.secs)
	for i, spec := range specs {
		rv, err := r.newRev(i, spec, b.Autoscale)
		if err != nil {
			return err
		}
		rv.series = &RevisionSeries{Name: revisionName(s.name, i+1), DeployedAt: spec.At, ReadyAt: -1, RetiredAt: -1, StoppedAt: -1,
			Starting: make([]int, n), Ready: make([]int, n), Draining: make([]int, n), Percent: make([]int, n),
			Requests: make([]int, n), OverMax: make([]int, n)}
		if spec.At == 0 {
			s.latest, s.ready = int32(i), int32(i) // configured before the run: nothing to warm
			rv.series.ReadyAt = 0
			if spec.Traffic != nil {
				s.traffic = spec.Traffic
			}
			continue
		}
		rv.stopped = true // not deployed yet: no engine calls
		r.push(int64(spec.At), evDeploy, int32(i), 0)
	}
	if len(b.Traffic) > 0 {
		s.traffic = b.Traffic
	}
	for i, c := range b.TrafficChanges {
		r.push(int64(c.At), evTraffic, int32(i), 0)
	}
	r.reroute()
	return nil
}

// pick returns the revision a call of group g goes to: its tag's, or the
// split's; nil for a tag no revision has (HTTP 404).
func (r *runner) pick(g *group) *backendRev {
	s := r.svc
	if s == nil {
		return r.revs[0]
	}
	if g.Tag != "" {
		i, ok := s.tags[g.Tag]
		if !ok {
			return nil
		}
		return r.revs[i]
	}
	if g.StickyKey != "" {
		return r.revs[s.keyedTargets[s.keyed.PickKey(g.StickyKey)]]
	}
	s.reqs++
	return r.revs[s.targets[s.split.Pick(s.reqs)]]
}

func (s *svcState) logf(r *runner, rev int32, needed, ready int, format string, args ...any) {
	name := ""
	if rev >= 0 {
		name = r.revs[rev].series.Name
	}
	s.log = append(s.log, TrafficEvent{At: time.Duration(r.now), Revision: name,
		Msg: fmt.Sprintf(format, args...), Needed: needed, Ready: ready})
}

// blockOf is t, or 100 % to the latest ready revision when empty.
func blockOf(t []TrafficTarget) []TrafficTarget {
	if len(t) == 0 {
		return []TrafficTarget{{LatestRevision: true, Percent: 100}}
	}
	return t
}

// revisionNamed is the revision called name, or -1.
func (r *runner) revisionNamed(name string) int32 {
	for _, rv := range r.revs {
		if rv.series.Name == name {
			return rv.idx
		}
	}
	return -1
}

// sharesOf is the percent each revision takes under t.
func (r *runner) sharesOf(t []TrafficTarget) map[int32]int {
	out := map[int32]int{}
	for _, e := range blockOf(t) {
		i := r.svc.ready
		if !e.LatestRevision {
			i = r.revisionNamed(e.Revision)
		}
		out[i] += e.Percent
	}
	return out
}

// routedShares is the percent each revision takes under the split in
// force.
func (r *runner) routedShares() map[int32]int {
	out := map[int32]int{}
	for slot := range autoscale.SplitSlots {
		out[r.svc.targets[r.svc.split.Entry(slot)]]++
	}
	return out
}

// serving is the instances the revision's measured load calls for, as
// the pool's: its last recommendation, or its ready instances while busy
// before its first.
func (rv *backendRev) serving() int {
	if rv.lastRec > 0 {
		return rv.lastRec
	}
	if st := rv.eng.Stats(); st.InFlight+st.Pending > 0 {
		return max(1, st.Ready)
	}
	return 0
}

// load is the instances serving the untagged requests now.
func (r *runner) load() int {
	n := 0
	for i, pct := range r.routedShares() {
		if pct > 0 {
			n += r.revs[i].serving()
		}
	}
	return n
}

// setFloor raises rv's min instances to n until set again (0: its own).
func (r *runner) setFloor(rv *backendRev, n int) {
	if rv.floor == n || rv.stopped {
		return
	}
	rv.floor = n
	if err := rv.eng.SetConfig(rv.engineConfig()); err != nil {
		r.err = fmt.Errorf("sim: warm-up minimum: %w", err)
	}
}

// engineConfig is rv's engine config: the configured one with its
// minimum raised to the warm-up floor, as the pool's.
func (rv *backendRev) engineConfig() autoscale.Config {
	cfg := rv.cfg
	cfg.MinInstances = max(cfg.MinInstances, min(rv.floor, maxInstancesOf(cfg)))
	cfg.Policy = rv.eng.Config().Policy
	return cfg
}

// reroute makes the split and tags of the traffic in force and retires
// the revisions it leaves without a share or tag, other than the latest
// and the latest ready, as the pool's reroute.
func (r *runner) reroute() {
	s := r.svc
	t := blockOf(s.traffic)
	keep := map[int32]bool{s.latest: true, s.ready: true}
	s.targets = s.targets[:0]
	s.tags = map[string]int32{}
	percents := make([]int, len(t))
	for i, e := range t {
		rv := s.ready
		if !e.LatestRevision {
			rv = r.revisionNamed(e.Revision)
		}
		keep[rv] = true
		s.targets = append(s.targets, rv)
		percents[i] = e.Percent
		if e.Tag != "" {
			s.tags[e.Tag] = rv
		}
	}
	split, err := autoscale.NewSplit(percents)
	if err != nil {
		r.err = fmt.Errorf("sim: traffic: %w", err)
		return
	}
	s.split = split
	// The sticky calls' split: the same shares, oldest revision first
	// whatever the block's order, as the pool's keyedSlots.
	order := make([]int, len(percents))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(s.targets[a]) - int(s.targets[b]) })
	sorted := make([]int, len(order))
	s.keyedTargets = s.keyedTargets[:0]
	for i, e := range order {
		sorted[i] = percents[e]
		s.keyedTargets = append(s.keyedTargets, s.targets[e])
	}
	if s.keyed, err = autoscale.NewSplit(sorted); err != nil {
		r.err = fmt.Errorf("sim: traffic: %w", err)
		return
	}
	for _, rv := range r.revs {
		if keep[rv.idx] || rv.retired || rv.stopped {
			continue
		}
		rv.retired, rv.retireBy = true, r.now+s.grace
		rv.series.RetiredAt = time.Duration(r.now)
		s.logf(r, rv.idx, 0, 0, "takes no traffic: draining by its requests in flight, for at most %v", time.Duration(s.grace))
	}
}

// deploy rolls revision i out, as the pool's Apply with a changed
// template: started with the instances its share of the serving load
// needs, the latest ready once they are.
func (r *runner) deploy(i int32) {
	s, rv := r.svc, r.revs[i]
	s.rolloutPrev = s.traffic
	if rv.spec.Traffic != nil {
		r.cancelShift()
		s.traffic = rv.spec.Traffic
	}
	load := r.load()
	named, latest := 0, 0
	for _, e := range blockOf(s.traffic) {
		if e.Revision == rv.series.Name {
			named += e.Percent
		}
		if e.LatestRevision {
			latest += e.Percent
		}
	}
	warm := 1 // as the pool: a new revision shows it can run, whatever its share
	if share := latest + named; share > 0 {
		warm = max(1, (load*share+99)/100)
	}
	boot := rv.cfg
	boot.MinInstances = max(rv.cfg.MinInstances, min(warm, maxInstancesOf(rv.cfg)))
	boot.Policy = r.sc.Backend.policy(boot)
	eng, err := autoscale.New(boot)
	if err != nil {
		r.err = fmt.Errorf("sim: deploy %s: %w", rv.series.Name, err)
		return
	}
	rv.eng, rv.stopped = eng, false
	s.latest, s.rollout, s.boot, s.rolloutBy = i, i, boot.MinInstances, r.now+s.rolloutTimout
	if boot.MinInstances > 0 {
		s.logf(r, i, boot.MinInstances, 0, "new revision: starting %d instances before moving traffic (serving load %d instances)", boot.MinInstances, load)
	} else {
		s.logf(r, i, 0, 0, "new revision, with no share of the traffic yet")
	}
	if named == 0 {
		r.reroute() // its tags reach it at once
	}
	d := eng.Tick(r.time()) // its min instances start now, as the pool's first tick
	r.handle(rv, d.Events)
	r.check()
}

// trafficChange begins change i: a shift that waits for the receiving
// revisions' instances. A retired revision it names runs again, as the
// pool runs a kept revision again (a rollback).
func (r *runner) trafficChange(i int32) {
	c := r.sc.Backend.TrafficChanges[i]
	for _, e := range c.Traffic {
		if e.Revision == "" {
			continue
		}
		j := r.revisionNamed(e.Revision)
		if j < 0 || (r.revs[j].stopped && !r.revs[j].retired) {
			// Not deployed yet: the server refuses the block (the admin
			// API answers 400) and the traffic stays.
			r.svc.logf(r, j, 0, 0, "traffic change %d refused: revision %s is not running", i+1, e.Revision)
			return
		}
	}
	for _, e := range c.Traffic {
		if j := r.revisionNamed(e.Revision); e.Revision != "" && r.revs[j].retired {
			r.revive(r.revs[j])
		}
	}
	r.shiftTraffic(c.Traffic)
}

// revive runs a retired revision again: a drained one on a new engine
// with its config, scaled from zero; one still draining takes requests
// again.
func (r *runner) revive(rv *backendRev) {
	if rv.stopped {
		cfg := rv.cfg
		cfg.Policy = r.sc.Backend.policy(cfg)
		eng, err := autoscale.New(cfg)
		if err != nil {
			r.err = fmt.Errorf("sim: run %s again: %w", rv.series.Name, err)
			return
		}
		rv.eng, rv.stopped = eng, false
	}
	rv.retired = false
	r.svc.logf(r, rv.idx, 0, 0, "retired revision named by the traffic: running it again")
	d := rv.eng.Tick(r.time())
	r.handle(rv, d.Events)
}

// shiftTraffic gives the service traffic t, at once when no revision's
// share grows beyond what its ready instances carry, else once the
// receiving revisions have the instances their shares need (or after the
// rollout timeout), as the pool's shift.
func (r *runner) shiftTraffic(t []TrafficTarget) {
	s := r.svc
	r.cancelShift()
	before := r.routedShares()
	load := r.load()
	var recv []receiver
	for i, pct := range r.sharesOf(t) {
		if pct <= before[i] {
			continue
		}
		need := min(max(1, (load*pct+99)/100), maxInstancesOf(r.revs[i].cfg))
		recv = append(recv, receiver{rev: i, from: before[i], to: pct, need: need})
	}
	slices.SortFunc(recv, func(a, b receiver) int { return b.to - a.to })
	s.shift, s.shiftTo, s.shiftBy = recv, slices.Clone(t), r.now+s.rolloutTimout
	for _, rc := range recv {
		rv := r.revs[rc.rev]
		if ready := rv.eng.Stats().Ready; ready < rc.need {
			r.setFloor(rv, rc.need)
			s.logf(r, rc.rev, rc.need, ready, "starting instances before moving traffic: %d → %d %%", rc.from, rc.to)
		}
	}
	r.check()
}

// cancelShift drops a pending traffic change: a later one takes over.
func (r *runner) cancelShift() {
	s := r.svc
	for _, rv := range r.revs {
		r.setFloor(rv, 0)
	}
	s.shift, s.shiftTo, s.shiftBy = nil, nil, 0
}

// check completes a pending rollout or traffic change whose revisions
// are ready, or whose rollout timeout has passed.
func (r *runner) check() {
	s := r.svc
	if s.rollout >= 0 {
		rv := r.revs[s.rollout]
		ready := rv.eng.Stats().Ready
		if ready == 0 && r.now >= s.rolloutBy {
			// No instance ready within the rollout timeout: the
			// rollout failed, as the pool's; traffic stays where it was.
			s.rollout = -1
			if named := slices.ContainsFunc(s.traffic, func(e TrafficTarget) bool { return e.Revision == rv.series.Name && e.Percent > 0 }); named {
				s.traffic = s.rolloutPrev
			}
			s.logf(r, rv.idx, s.boot, 0, "rollout failed: no instance ready within the rollout timeout; traffic stays where it was")
			r.reroute()
			if err := rv.eng.SetConfig(rv.engineConfig()); err != nil {
				r.err = fmt.Errorf("sim: %s: %w", rv.series.Name, err)
			}
		}
		if ready > 0 && (ready >= s.boot || r.now >= s.rolloutBy) {
			s.rollout = -1
			prev := r.revs[s.ready]
			s.ready = rv.idx
			rv.series.ReadyAt = time.Duration(r.now)
			if r.latestShare() == 100 && !prev.stopped {
				// It takes all the load: it decides from the load it
				// takes over, as the pool seeds it.
				rv.eng.Seed(r.time(), prev.eng.History(r.time()))
			}
			if ready < s.boot {
				s.logf(r, rv.idx, s.boot, ready, "the latest ready before it has the instances its share needs: the rollout timeout passed")
			} else {
				s.logf(r, rv.idx, s.boot, ready, "the latest ready: traffic rerouted")
			}
			r.reroute()
			if err := rv.eng.SetConfig(rv.engineConfig()); err != nil {
				r.err = fmt.Errorf("sim: %s: %w", rv.series.Name, err)
			}
		}
	}
	if s.shiftTo == nil && s.shift == nil {
		return
	}
	timedOut := r.now >= s.shiftBy
	for _, rc := range s.shift {
		if r.revs[rc.rev].eng.Stats().Ready < rc.need && !timedOut {
			return
		}
	}
	for _, rc := range s.shift {
		if r.revs[rc.rev].retired || r.revs[rc.rev].stopped {
			s.logf(r, rc.rev, 0, 0, "traffic change dropped: the revision was retired meanwhile")
			r.cancelShift()
			return
		}
	}
	for _, rc := range s.shift {
		if r.revs[rc.rev].eng.Stats().Ready == 0 {
			// As the pool's: never to a revision with no instance ready.
			s.logf(r, rc.rev, rc.need, 0, "traffic not moved %d → %d %%: no instance ready within the rollout timeout; traffic stays where it was", rc.from, rc.to)
			r.cancelShift()
			return
		}
	}
	for _, rc := range s.shift {
		ready := r.revs[rc.rev].eng.Stats().Ready
		if ready < rc.need {
			s.logf(r, rc.rev, rc.need, ready, "traffic moved %d → %d %% before the instances its share needs were ready: the rollout timeout passed", rc.from, rc.to)
		} else {
			s.logf(r, rc.rev, rc.need, ready, "traffic moved %d → %d %%: the instances its share needs were ready", rc.from, rc.to)
		}
	}
	s.traffic = s.shiftTo
	recv := s.shift
	s.shift, s.shiftTo, s.shiftBy = nil, nil, 0
	r.reroute()
	for _, rc := range recv {
		r.setFloor(r.revs[rc.rev], 0)
	}
}

// latestShare is the percent that follows the latest ready revision.
func (r *runner) latestShare() int {
	n := 0
	for _, e := range blockOf(r.svc.traffic) {
		if e.LatestRevision {
			n += e.Percent
		}
	}
	return n
}
