package revision

import (
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// This file is what package pool reads and sets of a revision to move
// traffic among a service's revisions: a snapshot taken under the
// revision's lock (State), the load it serves, the warm-up floor of a
// share about to grow, and the load history a revision taking all the
// traffic carries over.

// State is a revision's state at one moment, taken under its lock.
type State struct {
	// Config is the engine config as configured (SetConfig): without
	// the warm-up floor, the capacity share or a replacement's minimum.
	Config autoscale.Config
	// MinInstances is the engine's min instances now: the configured
	// one, raised by a warm-up floor (SetFloor) or for an unhealthy
	// instance's replacement.
	MinInstances int
	// MaxInstances is Config's max instances, the default applied.
	MaxInstances int
	// Limits are its request bounds.
	Limits Limits
	// Ready counts its ready instances; Instances all of them, those
	// starting and stopping included.
	Ready, Instances int
	// BecameReady says an instance of it has been ready: it can serve.
	BecameReady bool
	// StartErr says why its last start failed; "" once an instance is
	// ready.
	StartErr string
	// Recommended is its last recommended count, bounds applied.
	Recommended int
	// Liveness says its instances have a liveness check.
	Liveness bool
}

// State returns the revision's state now.
func (rv *Revision) State() State {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	st := rv.eng.Stats()
	return State{
		Config: rv.cfg, MinInstances: rv.eng.Config().MinInstances, MaxInstances: maxInstances(rv.cfg), Limits: rv.lim,
		Ready: st.Ready, Instances: len(rv.insts), BecameReady: rv.becameReady, StartErr: rv.startErr,
		Recommended: rv.lastRec.Count, Liveness: rv.live != nil,
	}
}

// Serving is the number of instances the revision's measured load calls
// for: its last recommendation (before min and max instances, so a
// warm-up floor does not count), or its ready instances while it is busy
// before its first.
func (rv *Revision) Serving() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.lastRec.Count > 0 {
		return rv.lastRec.Count
	}
	if st := rv.eng.Stats(); st.InFlight+st.Pending > 0 {
		return max(1, st.Ready)
	}
	return 0
}

// Warming reports whether a pending traffic change warms the revision up
// (SetFloor).
func (rv *Revision) Warming() bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.floor > 0
}

// SetFloor raises the revision's min instances to n (0: back to its
// configured minimum) until it is set again, for a share about to grow.
func (rv *Revision) SetFloor(n int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if n == rv.floor {
		return
	}
	rv.floor = n
	if err := rv.eng.SetConfigShared(rv.engineConfig()); err != nil {
		rv.log.Warn("cannot apply the warm-up minimum", "instances", n, "error", err)
	}
}

// UnhealthyOverMax is how many of the revision's instances are beyond its
// max instances because unhealthy ones finish their requests beside their
// replacements: its instances less its max, at most the unhealthy ones.
func (rv *Revision) UnhealthyOverMax() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	n := 0
	for _, in := range rv.insts {
		if in.unhealthy {
			n++
		}
	}
	return overBy(len(rv.insts), maxInstances(rv.cfg), n)
}

// overBy is how many of candidates are beyond limit among count
// instances: count less limit, at most candidates.
func overBy(count, limit, candidates int) int {
	return min(candidates, max(0, count-limit))
}

// CarryHistory seeds the revision's engine with the load history of the
// revisions from, whose traffic it takes over whole: it decides from that
// load, as the revisions that carried it did, not from windows that saw
// none.
func (rv *Revision) CarryHistory(from ...*Revision) {
	now := time.Now()
	for _, f := range from {
		if f == nil || f == rv {
			continue
		}
		f.mu.Lock()
		hist := f.eng.History(now)
		f.mu.Unlock()
		rv.mu.Lock()
		rv.eng.Seed(now, hist)
		rv.mu.Unlock()
	}
}

// RolloutOutcome is how a rollout of a revision (a new revision, or a
// traffic change growing its share) ended, as
// tollgate_pool_rollouts_total labels it.
type RolloutOutcome string

// The outcomes of a rollout.
const (
	// RolloutReady: the traffic moved once the instances its share needs
	// were ready.
	RolloutReady RolloutOutcome = "ready"
	// RolloutShort: the traffic moved at the rollout timeout with fewer
	// ready instances than its share needs, at least one.
	RolloutShort RolloutOutcome = "short"
	// RolloutFailed: no instance was ready within the rollout timeout;
	// the traffic stayed where it was.
	RolloutFailed RolloutOutcome = "failed"
)

// NoteRollout counts one rollout of the revision in
// tollgate_pool_rollouts_total, by its outcome; the pool, which moves
// traffic, calls it.
func (rv *Revision) NoteRollout(outcome RolloutOutcome) {
	rv.m.rollouts.WithLabelValues(string(outcome)).Inc()
}

// RemoveSeries drops the revision's series from its Metrics, counters
// too, once it has stopped and is not running again under its name.
func (rv *Revision) RemoveSeries() { rv.m.remove() }
