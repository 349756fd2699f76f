package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/retry"
)

// Limits on the work of one run.
const (
	// MinRetryWait is the shortest wait before a retry: shorter waits a
	// schedule returns are taken as MinRetryWait, so that a schedule of zero
	// waits cannot stall the virtual clock.
	MinRetryWait = time.Millisecond
	// MaxRunAttempts bounds the attempts of one run; Run stops with
	// ErrRunTooLarge beyond it.
	MaxRunAttempts = 200_000_000
	// MaxRetryLog bounds Result.RetryLog: the first MaxRetryLog retries are
	// recorded.
	MaxRetryLog = 1_000_000
)

// maxRunAttempts is MaxRunAttempts, lowered by tests.
var maxRunAttempts = MaxRunAttempts

// ErrRunTooLarge reports a run stopped at MaxRunAttempts.
var ErrRunTooLarge = errors.New("sim: run too large")

// epoch is the Unix time, in nanoseconds, of virtual time 0: the bucket and
// the autoscaler see epoch + virtual time.
const epoch int64 = 1_800_000_000 * int64(time.Second)

type call struct {
	start     int64
	seq       int
	group     int32
	attempts  int32
	prevDelay time.Duration
	cost      float64
	req       autoscale.RequestID
	inst      autoscale.InstanceID
	svc       int64  // a Scaler's request's service time (Run draws one)
	rev       int32  // the revision it is on
	live      bool   // on a revision: pending or running
	epoch     uint64 // numbers its use of the slot: a void completion is told apart
}

type group struct {
	Clients
	bucket   int
	budget   *retry.Budget
	segStart int64
	segRate  float64
	segEnd   int64
	segCount int64
	nextStep int
	sum      GroupSummary
	lat      []int64
	// charges are the buckets each call takes from, all or none (RunTask
	// on Fargate); nil: one token of bucket. out is scratch.
	charges []Charge
	out     []bucket.Decision
}

type runner struct {
	sc       Scenario
	now      int64
	end      int64
	seq      uint64
	events   eventHeap
	arrRnd   *rand.Rand // arrival gaps
	svcRnd   *rand.Rand // service times
	rtyRnd   *rand.Rand // retry jitter
	groups   []group
	limits   []bucket.Limit
	states   []bucket.State
	calls    []call
	free     []int32
	started  int
	attempts int

	revs      []*backendRev // the backend's revisions; none without a backend
	svc       *svcState     // traffic over revisions; nil without them
	epochs    uint64
	secs      []Second
	latencies []int64
	secFirst  int // index in latencies of the current second's first entry
	secAt     int // second the latencies since secFirst belong to
	sum       Summary
	log       []RetryRecord
	err       error

	buckets  []BucketSeries // of the buckets of groups with charges
	bucketOf []int          // each bucket's index in buckets, or -1; nil without

	targetBucket int       // the bucket of Scenario.Target
	quotas       *quotas   // nil without Scenario.Increases
	rec          *recorder // a Scaler's; nil in Run
}

// Run simulates sc and returns its result, or an error wrapping
// ErrInvalidScenario when sc cannot run. It is deterministic: the same
// scenario gives the same result. Arrivals, service times and retry jitter
// draw from three PCG streams seeded with sc.Seed, so runs that differ only in
// their retry or backend settings see the same arrivals.
func Run(sc Scenario) (*Result, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	sc = sc.withDefaults()
	r := &runner{
		sc:     sc,
		end:    int64(sc.Duration),
		arrRnd: rand.New(rand.NewPCG(sc.Seed, 1)),
		svcRnd: rand.New(rand.NewPCG(sc.Seed, 2)),
		rtyRnd: rand.New(rand.NewPCG(sc.Seed, 3)),
	}
	n := int((sc.Duration + time.Second - 1) / time.Second)
	r.secs = make([]Second, n)
	for i := range r.secs {
		r.secs[i].Start = time.Duration(i) * time.Second
	}
	keys := map[quota.Key]int{}
	var targetLimit bucket.Limit
	targetKey, _, targetErr := sc.Quota.Resolve(sc.Target.Service, sc.Target.Account, sc.Target.Region, sc.Target.Action)
	for i, c := range sc.Clients {
		key, limit, err := sc.Quota.Resolve(sc.Target.Service, sc.Target.Account, sc.Target.Region, c.Action)
		if err != nil {
			return nil, &FieldError{Path: []any{"clients", i, "action"}, Msg: err.Error(), Err: err}
		}
		if !sc.Limit.IsZero() && targetErr == nil && key == targetKey {
			limit = sc.Limit // the override is the target category's only
		}
		b, ok := keys[key]
		if !ok {
			b = len(r.limits)
			keys[key] = b
			r.limits = append(r.limits, limit)
			r.states = append(r.states, 0)
		}
		if i == 0 || c.Action == sc.Target.Action {
			targetLimit, r.targetBucket = limit, b
		}
		g := group{Clients: c, bucket: b, budget: sc.Retry.Budget.budget()}
		r.groups = append(r.groups, g)
	}
	if err := r.setCharges(keys); err != nil {
		return nil, err
	}
	if !sc.Backend.None {
		if err := r.newService(); err != nil {
			return nil, err
		}
	}
	for i := range r.groups {
		r.push(0, evSegment, int32(i), 0)
		if g := r.groups[i]; g.Burst > 0 {
			r.push(int64(g.BurstAt), evBurst, int32(i), 0)
		}
	}
	if len(sc.Increases) > 0 {
		if err := r.newQuotas(keys); err != nil {
			return nil, err
		}
	}
	r.push(0, evTick, 0, 0)
	for len(r.events) > 0 && r.err == nil {
		e := r.events.pop()
		if e.at == r.end && e.kind != evTick {
			continue // the run ends before anything else at its last instant
		}
		r.now = e.at
		r.dispatch(e)
	}
	if r.err != nil {
		return nil, r.err
	}
	r.closeLatencySecond()
	r.summarise()
	res := &Result{Scenario: sc, Limit: targetLimit, Seconds: r.secs, Summary: r.sum, RetryLog: r.log}
	if r.quotas != nil {
		res.LimitChanges = r.quotas.changes
	}
	res.Buckets = r.buckets
	if r.svc != nil {
		res.TrafficLog = r.svc.log
		for _, rv := range r.revs {
			res.Revisions = append(res.Revisions, *rv.series)
		}
	}
	for _, g := range r.groups {
		res.Groups = append(res.Groups, g.summary())
	}
	if len(res.Groups) == 1 {
		res.Groups[0].MeanLatency, res.Groups[0].P99Latency = r.sum.MeanLatency, r.sum.P99Latency
	}
	return res, nil
}

func (r *runner) push(at int64, k eventKind, idx int32, id uint64) {
	if at > r.end {
		return
	}
	r.seq++
	r.events.push(event{at: at, seq: r.seq, kind: k, idx: idx, id: id})
}

func (r *runner) sec() *Second {
	if r.rec != nil {
		return r.rec.second(r, int(r.now/int64(time.Second)))
	}
	i := int(r.now / int64(time.Second))
	if i >= len(r.secs) {
		i = len(r.secs) - 1
	}
	return &r.secs[i]
}

func (r *runner) time() time.Time { return time.Unix(0, epoch+r.now) }

func (r *runner) dispatch(e event) {
	switch e.kind {
	case evTick:
		r.tick()
	case evSegment:
		r.segment(e.idx)
	case evArrival:
		r.newCall(e.idx)
		r.nextArrival(e.idx, false)
	case evBurst:
		for range r.groups[e.idx].Burst {
			r.newCall(e.idx)
		}
	case evAttempt:
		r.attempt(e.idx)
	case evDone:
		r.done(e.idx, e.id)
	case evIncrease:
		r.increase(e.idx)
	case evApprove:
		r.approve(e.idx)
	case evReady:
		r.ready(r.revs[e.idx], autoscale.InstanceID(e.id))
	case evDeploy:
		r.deploy(e.idx)
	case evTraffic:
		r.trafficChange(e.idx)
	}
}

// segment starts the rate segment of group gi containing now.
func (r *runner) segment(gi int32) {
	g := &r.groups[gi]
	g.segStart, g.segRate, g.segCount = r.now, g.Rate, 0
	g.segEnd = math.MaxInt64
	for g.nextStep < len(g.Steps) && int64(g.Steps[g.nextStep].At) <= r.now {
		g.segRate = g.Steps[g.nextStep].Rate
		g.nextStep++
	}
	if g.nextStep < len(g.Steps) {
		g.segEnd = int64(g.Steps[g.nextStep].At)
		r.push(g.segEnd, evSegment, gi, 0)
	}
	r.nextArrival(gi, true)
}

// nextArrival schedules group gi's next call within its current segment.
func (r *runner) nextArrival(gi int32, fresh bool) {
	g := &r.groups[gi]
	if g.segRate <= 0 {
		return
	}
	// Arrival times are computed in floating point and compared with the
	// segment's end before conversion, so a tiny rate cannot overflow.
	var next float64
	switch g.Process {
	case Poisson:
		next = float64(r.now) + math.Ceil(r.arrRnd.ExpFloat64()/g.segRate*1e9)
	default:
		if !fresh {
			g.segCount++
		}
		next = float64(g.segStart) + math.Round(float64(g.segCount)*1e9/g.segRate)
	}
	if next >= float64(min(g.segEnd, r.end)) {
		return
	}
	r.push(int64(next), evArrival, gi, 0)
}

func (r *runner) newCall(gi int32) {
	var ci int32
	r.epochs++
	c := call{start: r.now, seq: r.started, group: gi, epoch: r.epochs}
	r.started++
	r.groups[gi].sum.Calls++
	if n := len(r.free); n > 0 {
		ci = r.free[n-1]
		r.free = r.free[:n-1]
		r.calls[ci] = c
	} else {
		ci = int32(len(r.calls))
		r.calls = append(r.calls, c)
	}
	if b := r.groups[gi].budget; b != nil {
		b.Begin()
	}
	r.attempt(ci)
}

func (r *runner) attempt(ci int32) {
	c := &r.calls[ci]
	c.attempts++
	if r.attempts++; r.attempts > maxRunAttempts {
		r.err = fmt.Errorf("%w: more than %d attempts by %v", ErrRunTooLarge, maxRunAttempts, time.Duration(r.now))
		return
	}
	s := r.sec()
	s.Attempts++
	if c.attempts == 1 {
		s.FirstAttempts++
	} else {
		s.Retries++
		g := &r.groups[c.group]
		g.sum.Retries++
	}
	g := &r.groups[c.group]
	if ok, hint := r.take(g); !ok {
		s.Throttled++
		g.sum.Throttled++
		r.fail(ci, false, hint)
		return
	}
	s.Admitted++
	if len(r.revs) == 0 {
		r.succeed(ci)
		return
	}
	rv := r.pick(g)
	if rv == nil { // its tag reaches no revision: HTTP 404, not retried
		r.giveUp(ci)
		return
	}
	if rv.series != nil {
		if g.sum.Revisions == nil {
			g.sum.Revisions = map[string]int{}
		}
		g.sum.Revisions[rv.series.Name]++
	}
	r.route(ci, rv)
}

// fail handles a throttled (rejected false) or 429-rejected attempt: the
// client retries or gives up. hint is the bucket's RetryAfter for a throttle.
func (r *runner) fail(ci int32, rejected bool, hint time.Duration) {
	c := &r.calls[ci]
	d, ok := r.sc.Retry.wait(c.attempts, c.prevDelay, time.Duration(r.now-c.start), hint, rejected, r.rtyRnd)
	if !ok {
		r.giveUp(ci)
		return
	}
	if b := r.groups[c.group].budget; b != nil {
		cost, err := b.Withdraw(retry.Throttle)
		if err != nil {
			r.sum.BudgetRefusals++
			r.giveUp(ci)
			return
		}
		c.cost = cost
	}
	c.prevDelay = d
	if r.sc.RecordRetries && len(r.log) < MaxRetryLog {
		r.log = append(r.log, RetryRecord{Call: c.seq, Attempt: int(c.attempts), At: time.Duration(r.now), Delay: d})
	}
	if int64(d) < r.end-r.now {
		r.push(r.now+int64(d), evAttempt, ci, 0)
	}
}

// wait is the client's decision after a throttled (rejected false) or
// 429-rejected attempt, the attempts-th of a call that began elapsed ago
// and last waited prev: the wait before the next attempt, or false when
// the call gives up. hint is the bucket's RetryAfter for a throttle. The
// retry budget is the caller's to consult.
func (rt *Retry) wait(attempts int32, prev, elapsed, hint time.Duration, rejected bool, rnd retry.Rand) (time.Duration, bool) {
	if rt.Disabled || (rejected && rt.No429) || (rt.MaxAttempts > 0 && int(attempts) >= rt.MaxAttempts) {
		return 0, false
	}
	d := rt.Schedule.Delay(int(attempts-1), prev, rnd)
	d = max(d, MinRetryWait)
	if rt.UseRetryAfter {
		d = max(d, min(hint, retry.DefaultMaxHint))
	}
	if rt.Deadline > 0 && d > rt.Deadline-elapsed {
		return 0, false
	}
	return d, true
}

func (r *runner) giveUp(ci int32) {
	r.calls[ci].live = false
	r.sec().Failed++
	r.sum.Failed++
	r.groups[r.calls[ci].group].sum.Failed++
	r.free = append(r.free, ci)
}

func (r *runner) succeed(ci int32) {
	c := &r.calls[ci]
	c.live = false
	r.sec().Completed++
	r.sum.Succeeded++
	r.groups[c.group].sum.Succeeded++
	if r.rec != nil { // a Scaler keeps no latencies: its memory is bounded
		r.rec.stats.Served++
		r.free = append(r.free, ci)
		return
	}
	if len(r.groups) > 1 { // a single group's latencies are the run's
		r.groups[c.group].lat = append(r.groups[c.group].lat, r.now-c.start)
	}
	if b := r.groups[c.group].budget; b != nil {
		b.Succeeded(c.attempts == 1, c.cost)
	}
	sec := int(r.now / int64(time.Second))
	if sec != r.secAt {
		r.closeLatencySecond()
		r.secAt, r.secFirst = sec, len(r.latencies)
	}
	r.latencies = append(r.latencies, r.now-c.start)
	r.free = append(r.free, ci)
}

// closeLatencySecond sets the percentiles of the second the latest
// latencies belong to.
func (r *runner) closeLatencySecond() {
	l := r.latencies[r.secFirst:]
	if len(l) == 0 || r.secAt >= len(r.secs) {
		return
	}
	slices.Sort(l)
	r.secs[r.secAt].P50 = time.Duration(percentile(l, 0.50))
	r.secs[r.secAt].P99 = time.Duration(percentile(l, 0.99))
}

// percentile returns the nearest-rank p-th percentile of sorted l.
func percentile(l []int64, p float64) int64 {
	i := int(math.Ceil(p*float64(len(l)))) - 1
	return l[max(i, 0)]
}
