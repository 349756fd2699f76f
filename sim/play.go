package sim

// This file plays recorded arrivals, rather than generated ones, through
// the throttle and the clients' retries: the engine of package replay.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/retry"
)

// ErrUnboundedRetry reports a retry policy a Player refuses: one with
// neither a deadline nor an attempt cap, whose calls could retry forever.
var ErrUnboundedRetry = errors.New("sim: retry policy bounds neither attempts nor time")

// Attempt is one attempt a Player made, as its observer sees it.
type Attempt struct {
	// At is the attempt's instant, in Unix nanoseconds.
	At int64
	// Bucket and Group are the call's, as given to Arrive.
	Bucket, Group int32
	// N is the attempt's number within its call, 1 for the first.
	N int32
	// Allowed reports whether it took a token.
	Allowed bool
	// GaveUp reports a throttled attempt after which the call gives up
	// (no retry left, deadline, or budget).
	GaveUp bool
	// Plan is the call's charges (AddCharges), -1 for a call of one
	// token of Bucket, which is then the plan's first bucket. Short is
	// the index in the plan of the bucket a refused attempt was short of,
	// -1 when allowed or not a plan.
	Plan, Short int32
}

type playCall struct {
	start     int64
	prevDelay time.Duration
	cost      float64
	bucket    int32
	plan      int32 // -1: one token of bucket
	group     int32
	attempts  int32
}

type playGroup struct {
	retry  Retry
	budget *retry.Budget
}

// A Player plays arrivals given one by one, in time order, through token
// buckets of package bucket and the client groups' retry policies, as Run
// does with the arrivals of its clients, with no backend behind the
// throttle: an admitted attempt succeeds at once. Its clock is the
// arrivals' own (Unix nanoseconds); it holds only the calls waiting to
// retry, so its memory is bounded by the arrivals within a retry
// deadline, not by how many there are in all.
//
// A Player is not safe for concurrent use.
type Player struct {
	// Observe, when not nil, is called for every attempt, in time order.
	Observe func(Attempt)

	now     int64
	seq     uint64
	events  eventHeap
	rnd     *rand.Rand
	limits  []bucket.Limit
	states  []bucket.State
	groups  []playGroup
	plans   [][]Charge
	out     []bucket.Decision // TakeAll's scratch
	calls   []playCall
	free    []int32
	started bool
}

// NewPlayer returns a player whose client group i retries as groups[i]
// does (zero fields take Retry's defaults, as in a Scenario); retry
// jitter draws from a PCG stream seeded with seed.
func NewPlayer(groups []Retry, seed uint64) (*Player, error) {
	p := &Player{rnd: rand.New(rand.NewPCG(seed, 3))}
	for i, rt := range groups {
		sc := Scenario{Retry: rt}
		if err := sc.Validate(); err != nil {
			return nil, fmt.Errorf("client group %d: %w", i, err)
		}
		rt = sc.withDefaults().Retry
		if !rt.Disabled && rt.Deadline < 0 && rt.MaxAttempts == 0 {
			return nil, fmt.Errorf("%w: client group %d", ErrUnboundedRetry, i)
		}
		p.groups = append(p.groups, playGroup{retry: rt, budget: rt.Budget.budget()})
	}
	if len(p.groups) == 0 {
		return nil, fmt.Errorf("%w: a player needs at least one client group", ErrInvalidScenario)
	}
	return p, nil
}

// AddBucket adds a full bucket of limit l and returns its index for
// Arrive. l must not be the zero Limit.
func (p *Player) AddBucket(l bucket.Limit) int32 {
	p.limits = append(p.limits, l)
	p.states = append(p.states, 0)
	return int32(len(p.limits) - 1)
}

// AddCharges adds a plan: the buckets a call takes from, all or none
// (TakeAll), for ArriveCharged, and returns its index. The buckets must
// have been added; tokens must be positive.
func (p *Player) AddCharges(cs []Charge) (int32, error) {
	if len(cs) == 0 {
		return 0, errors.New("sim: a plan of no charges")
	}
	for _, c := range cs {
		if c.Bucket < 0 || int(c.Bucket) >= len(p.limits) || c.Tokens < 1 {
			return 0, fmt.Errorf("sim: charge of %d tokens on bucket %d of %d", c.Tokens, c.Bucket, len(p.limits))
		}
	}
	p.plans = append(p.plans, append([]Charge(nil), cs...))
	if len(cs) > len(p.out) {
		p.out = make([]bucket.Decision, len(cs))
	}
	return int32(len(p.plans) - 1), nil
}

// Plans returns how many plans were added.
func (p *Player) Plans() int { return len(p.plans) }

// Plan returns the charges of plan i.
func (p *Player) Plan(i int32) []Charge { return p.plans[i] }

// Limit returns the limit of bucket b.
func (p *Player) Limit(b int32) bucket.Limit { return p.limits[b] }

// Now returns the player's clock: the instant of the last attempt made.
func (p *Player) Now() int64 { return p.now }

// Arrive plays one new call of client group g on bucket b at instant at
// (Unix nanoseconds): first the retries due at or before at, then the
// call's first attempt. An arrival earlier than the clock is played at
// the clock's instant.
func (p *Player) Arrive(at int64, b, g int32) error {
	if b < 0 || int(b) >= len(p.limits) {
		return fmt.Errorf("sim: arrival on bucket %d of %d", b, len(p.limits))
	}
	return p.arrive(at, b, -1, g)
}

// ArriveCharged plays one new call of client group g that takes plan's
// charges (AddCharges), all or none, as Arrive plays a call of one token.
func (p *Player) ArriveCharged(at int64, plan, g int32) error {
	if plan < 0 || int(plan) >= len(p.plans) {
		return fmt.Errorf("sim: arrival on plan %d of %d", plan, len(p.plans))
	}
	return p.arrive(at, p.plans[plan][0].Bucket, plan, g)
}

func (p *Player) arrive(at int64, b, plan, g int32) error {
	if g < 0 || int(g) >= len(p.groups) {
		return fmt.Errorf("sim: arrival of client group %d of %d", g, len(p.groups))
	}
	p.runUntil(at)
	if !p.started || at > p.now {
		p.now, p.started = at, true
	}
	var ci int32
	c := playCall{start: p.now, bucket: b, plan: plan, group: g}
	if n := len(p.free); n > 0 {
		ci = p.free[n-1]
		p.free = p.free[:n-1]
		p.calls[ci] = c
	} else {
		ci = int32(len(p.calls))
		p.calls = append(p.calls, c)
	}
	if bu := p.groups[g].budget; bu != nil {
		bu.Begin()
	}
	p.attempt(ci)
	return nil
}

// Finish plays every retry still waiting, to the end of the calls.
func (p *Player) Finish() { p.runUntil(1<<63 - 1) }

// Waiting returns the number of calls waiting to retry.
func (p *Player) Waiting() int { return len(p.events) }

func (p *Player) runUntil(at int64) {
	for len(p.events) > 0 && p.events[0].at <= at {
		e := p.events.pop()
		p.now = e.at
		p.attempt(e.idx)
	}
}

func (p *Player) attempt(ci int32) {
	c := &p.calls[ci]
	c.attempts++
	var d bucket.Decision
	a := Attempt{At: p.now, Bucket: c.bucket, Group: c.group, N: c.attempts, Plan: c.plan, Short: -1}
	if c.plan < 0 {
		var st bucket.State
		st, d = p.limits[c.bucket].TakeAt(p.states[c.bucket], p.now, 1)
		if d.Allowed {
			p.states[c.bucket] = st
		}
	} else if short := TakeAll(p.limits, p.states, p.plans[c.plan], p.now, p.out); short < 0 {
		d.Allowed = true
	} else {
		d, a.Short = p.out[short], int32(short)
	}
	a.Allowed = d.Allowed
	g := &p.groups[c.group]
	if d.Allowed {
		if g.budget != nil {
			g.budget.Succeeded(c.attempts == 1, c.cost)
		}
		p.observe(a)
		p.free = append(p.free, ci)
		return
	}
	wait, ok := g.retry.wait(c.attempts, c.prevDelay, time.Duration(p.now-c.start), d.RetryAfter, false, p.rnd)
	if ok && g.budget != nil {
		cost, err := g.budget.Withdraw(retry.Throttle)
		ok = err == nil
		c.cost = cost
	}
	if !ok {
		a.GaveUp = true
		p.observe(a)
		p.free = append(p.free, ci)
		return
	}
	c.prevDelay = wait
	p.observe(a)
	p.seq++
	p.events.push(event{at: p.now + int64(wait), seq: p.seq, kind: evAttempt, idx: ci})
}

func (p *Player) observe(a Attempt) {
	if p.Observe != nil {
		p.Observe(a)
	}
}
