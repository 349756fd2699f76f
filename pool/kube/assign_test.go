package kube

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// even is the even split of ids, as a leader publishes it with no load.
func even(ids ...string) *assignment { return splitByLoad(ids, nil, true) }

// A replica's share under a split: one request each, the rest by part;
// an even split gives what an even division gives; the members' shares
// never sum above the pod's max concurrency; the meet of two splits
// gives every replica at most its share in either.
func TestAssignmentShare(t *testing.T) {
	all := splitByLoad([]string{"a", "b", "c"}, map[string]float64{"a": 8}, false)
	for _, tc := range []struct {
		a    *assignment
		id   string
		mc   int
		want int
		what string
	}{
		{even("a"), "a", 6, 6, "alone"},
		{even("a", "b", "c"), "a", 6, 2, "even of three"},
		{even("a", "b", "c"), "c", 7, 2, "7 / 3"},
		{even("a", "b"), "b", 9, 4, "9 / 2"},
		{even("a", "b"), "a", 80, 40, "half of 80"},
		{all, "a", 6, 4, "all the load of three"},
		{all, "b", 6, 1, "none of it"},
		{all, "d", 6, 1, "a replica the split does not name"},
		{even("a", "b", "c"), "a", 2, 1, "fewer requests than replicas"},
		{splitByLoad([]string{"a", "b", "c"}, map[string]float64{"a": 3, "b": 3, "c": 2}, false), "a", 6, 2, "3 of 3/3/2"},
		{splitByLoad([]string{"a", "b", "c"}, map[string]float64{"a": 3, "b": 3, "c": 2}, false), "c", 6, 2, "2 of 3/3/2: the pod filled, rounded within a third"},
	} {
		if got := tc.a.share(tc.id, tc.mc); got != tc.want {
			t.Errorf("%s: share(%s, %d) = %d, want %d (%+v)", tc.what, tc.id, tc.mc, got, tc.want, tc.a)
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	split := func(n int) *assignment {
		ids := make([]string, n)
		w := map[string]float64{}
		for i := range ids {
			ids[i] = fmt.Sprint(i)
			if rnd.IntN(3) > 0 {
				w[ids[i]] = rnd.Float64() * 100
			}
		}
		return splitByLoad(ids, w, rnd.IntN(10) == 0)
	}
	for range 10_000 {
		mc, n := 1+rnd.IntN(1000), 1+rnd.IntN(20)
		a, b := split(n), split(n)
		if !a.valid() {
			t.Fatalf("split %+v is not valid", a)
		}
		lo := meet(a, b)
		sum := 0
		for id := range a.Parts {
			s := a.share(id, mc)
			if s < 1 || s > mc {
				t.Fatalf("share %d of %d", s, mc)
			}
			if l := lo.share(id, mc); l > s || l > b.share(id, mc) {
				t.Fatalf("max concurrency %d: %s's share %d under the meet, %d and %d under the two splits", mc, id, l, s, b.share(id, mc))
			}
			sum += s
		}
		if sum > max(mc, n) {
			t.Fatalf("max concurrency %d, split %+v: shares sum to %d", mc, a, sum)
		}
	}
}

// An assignment read from a report is checked before any replica routes
// by it.
func TestAssignmentValid(t *testing.T) {
	for _, tc := range []struct {
		a    *assignment
		want bool
	}{
		{nil, false},
		{even("a", "b"), true},
		{&assignment{Members: 0}, false},
		{&assignment{Members: 1, Parts: map[string]int{"a": shareParts + 1}}, false},
		{&assignment{Members: 2, Parts: map[string]int{"a": shareParts, "b": 1}}, false},
		{&assignment{Members: 1, Parts: map[string]int{"a": 1, "b": 1}}, false},
		{&assignment{Members: 2, Parts: map[string]int{"a": -1}}, false},
		{&assignment{Members: maxShareMembers + 1}, false},
	} {
		if got := tc.a.valid(); got != tc.want {
			t.Errorf("%+v valid = %v, want %v", tc.a, got, tc.want)
		}
	}
}

// simLease is the lease duration of the simulated replicas.
const simLease = 8 * time.Second

// simMsg is a report in flight through the report Lease.
type simMsg struct {
	at     time.Time
	weight float64
	apply  shareVersion
	shares *assignment // the leader's
}

// simReplica is one replica of the simulation: its applier, its engines'
// shares (read once a second at its own phase, for every max
// concurrency), and its view of the others as the Lease delivers them.
type simReplica struct {
	id      string
	alive   bool
	load    float64
	phase   time.Duration
	lag     time.Duration // a slow watch: its deliveries come this much later
	synced  bool          // has read the Lease once
	applier shareApplier
	engine  map[int]int  // max concurrency → the share its engines route by
	named   map[int]bool // whether that share came from a split naming it
	inbox   []simMsg     // the leader's reports, in order
	heard   time.Time    // when it last heard from the leader
	sentAt  time.Time
	sent    shareVersion
}

// simCluster is n replicas and a leader on a fake clock: every report
// reaches each reader after its own random delay (in order per reader),
// the leader steps its plan every 100 ms, the engines read their share
// once a second. check fails the test whenever the engines' shares of a
// pod sum above its max concurrency (one more per replica routing by a
// split that does not name it: a joiner).
type simCluster struct {
	t        *testing.T
	rnd      *rand.Rand
	now      time.Time
	reps     map[string]*simReplica
	leader   string
	plan     sharePlan
	view     map[string]shareMember // the leader's view of the others
	toLeader map[string][]simMsg
	mcs      []int
}

func newSim(t *testing.T, seed uint64, ids ...string) *simCluster {
	c := &simCluster{t: t, rnd: rand.New(rand.NewPCG(seed, 7)), now: time.Unix(1_000_000, 0),
		reps: map[string]*simReplica{}, view: map[string]shareMember{}, toLeader: map[string][]simMsg{}, mcs: []int{1, 2, 3, 4, 6, 7, 10, 80}}
	for _, id := range ids {
		c.join(id)
	}
	c.leader = ids[0]
	c.plan = sharePlan{TakeOver: true}
	return c
}

func (c *simCluster) join(id string) {
	c.reps[id] = &simReplica{id: id, alive: true, phase: time.Duration(c.rnd.IntN(10)) * 100 * time.Millisecond,
		engine: map[int]int{}, named: map[int]bool{}, heard: c.now}
	for _, mc := range c.mcs {
		c.reps[id].engine[mc] = 1
	}
}

// delay is a report's trip to a reader: up to 800 ms, in order after the
// last one queued for it.
func (c *simCluster) delay(q []simMsg, lag time.Duration) time.Time {
	at := c.now.Add(time.Duration(c.rnd.IntN(9))*100*time.Millisecond + lag)
	if len(q) > 0 && q[len(q)-1].at.After(at) {
		at = q[len(q)-1].at
	}
	return at
}

// shareOf is what a replica's engine reads at now (Runner.Share).
func (c *simCluster) shareOf(r *simReplica, mc int) (int, bool) {
	a := r.applier.Cur
	switch {
	case !r.synced:
		return 1, false
	case a == nil:
		n := 0
		for _, o := range c.reps {
			if o.alive {
				n++
			}
		}
		return max(1, mc/n), true
	}
	_, named := a.Parts[r.id]
	if r.id != c.leader && c.now.Sub(r.heard) >= 2*simLease/3 {
		return 1, named
	}
	return a.share(r.id, mc), named
}

// step advances the clock by 100 ms.
func (c *simCluster) step() {
	c.now = c.now.Add(100 * time.Millisecond)
	ld := c.reps[c.leader]
	// The leader reads the others' reports, steps its plan, publishes.
	for id, q := range c.toLeader {
		for len(q) > 0 && !q[0].at.After(c.now) {
			a := q[0].apply
			c.view[id] = shareMember{ID: id, Weight: q[0].weight, HasLoad: true, Applied: &a, Seen: q[0].at}
			q = q[1:]
		}
		c.toLeader[id] = q
	}
	if ld.alive {
		applied := ld.applier.applied(c.now)
		members := []shareMember{{ID: c.leader, Weight: ld.load, HasLoad: true, Applied: &applied, Seen: c.now}}
		for id, m := range c.view {
			if id != c.leader {
				members = append(members, m)
			}
		}
		slices.SortFunc(members, func(a, b shareMember) int { return strings.Compare(a.ID, b.ID) })
		before := c.plan.Pub
		c.plan = c.plan.next(c.now, simLease, c.leader, members)
		if c.plan.Pub != before {
			ld.applier.adopt(c.plan.Pub, c.now)
		}
		if c.plan.Pub != before || c.now.Sub(time.Unix(1_000_000, 0))%(2*time.Second) == 0 { // a change, or the heartbeat
			for _, r := range c.reps {
				if r.id != c.leader && r.alive {
					r.inbox = append(r.inbox, simMsg{at: c.delay(r.inbox, r.lag), shares: c.plan.Pub})
				}
			}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(c.reps)) {
		r := c.reps[r]
		if !r.alive {
			continue
		}
		for len(r.inbox) > 0 && !r.inbox[0].at.After(c.now) {
			r.synced, r.heard = true, r.inbox[0].at
			if r.id != c.leader {
				r.applier.adopt(r.inbox[0].shares, c.now)
			}
			r.inbox = r.inbox[1:]
		}
		if r.id == c.leader {
			r.synced = true
		}
		// Its report: at once when its applied version changes, else
		// once a second with its load.
		if v := r.applier.applied(c.now); r.id != c.leader && (v != r.sent || c.now.Sub(r.sentAt) >= time.Second) {
			r.sent, r.sentAt = v, c.now
			q := c.toLeader[r.id]
			c.toLeader[r.id] = append(q, simMsg{at: c.delay(q, r.lag), weight: r.load, apply: v})
		}
		if c.now.Sub(time.Unix(1_000_000, 0))%time.Second == r.phase {
			for _, mc := range c.mcs {
				r.engine[mc], r.named[mc] = c.shareOf(r, mc)
			}
		}
	}
	c.check()
}

// check fails the test if a pod could get more than its max concurrency.
func (c *simCluster) check() {
	c.t.Helper()
	for _, mc := range c.mcs {
		sum, n, unnamed := 0, 0, 0
		var shares []string
		for _, id := range slices.Sorted(maps.Keys(c.reps)) {
			r := c.reps[id]
			if !r.alive {
				continue
			}
			n++
			sum += r.engine[mc]
			if !r.named[mc] {
				unnamed++
			}
			shares = append(shares, fmt.Sprintf("%s=%d", id, r.engine[mc]))
		}
		if sum > max(mc, n)+unnamed {
			c.t.Fatalf("at %v: max concurrency %d, the engines' shares %v sum to %d (%d not named); published %+v",
				c.now.Sub(time.Unix(1_000_000, 0)), mc, shares, sum, unnamed, c.plan.Pub)
		}
	}
}

func (c *simCluster) run(d time.Duration) {
	for end := c.now.Add(d); c.now.Before(end); {
		c.step()
	}
}

// engines is every live replica's share of a pod of max concurrency mc.
func (c *simCluster) engines(mc int) map[string]int {
	s := map[string]int{}
	for id, r := range c.reps {
		if r.alive {
			s[id] = r.engine[mc]
		}
	}
	return s
}

// Adversarial orderings on a fake clock: reports reach each reader after
// random delays, engines read their share at different moments, one
// replica's watch lags seconds behind; load starts on all at once, moves
// to one replica, a replica joins, one leaves, the leader dies and
// another takes over. At no step do the engines' shares of a pod sum
// above its max concurrency, and once the load holds still the split
// follows it.
func TestSplitNeverPassesMaxConcurrency(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := newSim(t, seed, "a", "b", "c")
			c.run(10 * time.Second)
			if s := c.engines(6); !maps.Equal(s, map[string]int{"a": 2, "b": 2, "c": 2}) {
				t.Fatalf("no load anywhere: shares of 6 %v, want 2 each", s)
			}
			// Load starts on all three at once.
			for _, r := range c.reps {
				r.load = 3
			}
			c.run(15 * time.Second)
			if s := c.engines(6); !maps.Equal(s, map[string]int{"a": 2, "b": 2, "c": 2}) {
				t.Fatalf("3 requests on each: shares of 6 %v, want 2 each", s)
			}
			// One replica takes all the load, then another does.
			c.reps["a"].load, c.reps["b"].load, c.reps["c"].load = 0, 9, 0
			c.run(15 * time.Second)
			if s := c.engines(6); !maps.Equal(s, map[string]int{"a": 1, "b": 4, "c": 1}) {
				t.Fatalf("all the load on b: shares of 6 %v, want b 4, the others 1", s)
			}
			c.reps["b"].load, c.reps["c"].load = 0, 9
			c.reps["b"].lag = 3 * time.Second // b's watch lags a version behind
			c.run(20 * time.Second)
			if s := c.engines(80); s["c"] < 70 {
				t.Fatalf("all the load on c: shares of 80 %v, want c most", s)
			}
			// A replica joins, with load.
			c.reps["b"].lag = 0
			c.join("d")
			c.reps["d"].load = 9
			c.run(20 * time.Second)
			if s := c.engines(10); s["d"] < 3 || s["c"] < 3 {
				t.Fatalf("c and d with the load of four: shares of 10 %v, want c and d 3 or more", s)
			}
			// c leaves (killed): after the lease duration its share is
			// the others'.
			c.reps["c"].alive = false
			c.run(20 * time.Second)
			if s := c.engines(10); s["d"] < 6 {
				t.Fatalf("d with all the load of three: shares of 10 %v, want d 6 or more", s)
			}
			// The leader dies; after the lease duration b takes over
			// from the split it routes by.
			c.reps["a"].alive = false
			c.run(simLease)
			c.leader = "b"
			c.plan = sharePlan{Pub: c.reps["b"].applier.Cur, Target: nil, TakeOver: true}
			c.view = map[string]shareMember{}
			c.toLeader = map[string][]simMsg{}
			for _, r := range c.reps {
				r.inbox = nil
			}
			c.run(20 * time.Second)
			if s := c.engines(10); s["d"] < 7 {
				t.Fatalf("b leads, d has all the load of two: shares of 10 %v, want d 7 or more", s)
			}
		})
	}
}

// A replica reports an assignment applied only applyDelay after adopting
// it, and keeps the last applied while a newer one waits.
func TestShareApplierReportsLate(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var s shareApplier
	if v := s.applied(now); v != (shareVersion{}) || !s.due().IsZero() {
		t.Fatalf("before any split: applied %+v, due %v", v, s.due())
	}
	one := even("a", "b")
	one.Version = shareVersion{Leader: "a", Gen: 1}
	s.adopt(one, now)
	if v := s.applied(now.Add(applyDelay - time.Millisecond)); v != (shareVersion{}) {
		t.Fatalf("applied %+v before applyDelay", v)
	}
	if d := s.due(); !d.Equal(now.Add(applyDelay)) {
		t.Fatalf("due %v, want %v", d, now.Add(applyDelay))
	}
	two := even("a", "b", "c")
	two.Version = shareVersion{Leader: "a", Gen: 2}
	s.adopt(two, now.Add(applyDelay+time.Millisecond)) // one was applied by then
	if v := s.applied(now.Add(2 * applyDelay)); v != one.Version {
		t.Fatalf("applied %+v while two is new, want one's", v)
	}
	if v := s.applied(now.Add(3 * applyDelay)); v != two.Version {
		t.Fatalf("applied %+v, want two's", v)
	}
}
