package replay

// This file finds, for each bucket, the smallest limits that would have
// admitted its calls, exactly to the nanosecond of a refill interval (the
// precision of package bucket), by playing the trace of played calls
// (trace.go) again, a few times, with many candidate limits at once.
//
// Every call. Let B be the recommended burst: the configured burst or the
// most calls made at one instant, whichever is larger (no smaller burst
// admits them all at any rate). A bucket of interval I admits every call
// iff, for every busy span — calls k..j with no instant between them at
// which the bucket was full again — (n − B)·I ≤ t_j − t_k, n the calls of
// the span. So the largest admitting interval is I* = min ⌊(t_j − t_k) /
// (n − B)⌋ over the spans with n > B. One play at a candidate interval c
// gives, in O(1) state, the bound g(c) of its own busy spans: g(c) ≥ I*
// always, and g(c) < c exactly when c throttles. Taking c = g(c) again
// (Dinkelbach's method for a least ratio) reaches I* in a few plays; other
// candidates between the largest interval known to admit all and the
// bound narrow it alongside. The first bound is the whole log's: over a
// span T holding n calls, (n − B)·I ≤ T.
//
// 99.9 %. Real buckets (a throttled call takes no token) run at candidate
// intervals with burst B, and at the configured interval with candidate
// bursts; each search keeps the largest interval (smallest burst) known to
// admit 99.9 % of the calls and the one past it known not to, and ends
// when they are one apart. They start from what the whole log bounds: a
// bucket admits at most B + T/I calls over a span T, so admitting all but
// a of n calls needs I ≤ T/(n − a − B) and a burst of at least
// n − a − T/I; and what admits every call admits 99.9 % of them. The rate
// search starts once the every-call search has ended, from its interval. This relies on a bucket's throttles never
// falling as its interval grows or its burst shrinks, which holds for
// one-token takes (TestThrottlesAreMonotone checks it on random calls).
//
// Memory is the candidates' state per bucket, not the calls: searchWidth
// candidates of each search, fewer when there are many buckets.

import (
	"math"
	"math/bits"
	"strconv"

	"github.com/tollgate/tollgate/bucket"
)

// maxWindow is package bucket's bound on capacity × interval.
const maxWindow = int64(1) << 61

// searchWidth is the candidates of each search a play tries per bucket,
// and searchBudget bounds the candidates of all buckets together.
const (
	searchWidth  = 10
	searchBudget = 1 << 21
	maxPlays     = 200
)

// span is a search's bracket over whole numbers: yes is the best value
// known to satisfy (0: none yet), no the nearest past it known not to.
// For intervals, yes < no (larger is better); for bursts, yes > no.
type span struct{ yes, no int64 }

func (s span) done() bool { return s.yes-s.no == 1 || s.no-s.yes == 1 }

// candidates appends to out up to k values of [lo, hi] (none when hi <
// lo), spaced geometrically when the range is wide, evenly when it is
// narrow, every value when it holds no more than k.
func candidates(lo, hi int64, k int, out []int64) []int64 {
	if hi-lo+1 <= int64(k) {
		for v := lo; v <= hi; v++ {
			out = append(out, v)
		}
		return out
	}
	if float64(hi) > 4*float64(max(lo, 1)) {
		r := math.Pow(float64(hi)/float64(max(lo, 1)), 1/float64(k+1))
		v := float64(max(lo, 1))
		prev := lo - 1
		for range k {
			v *= r
			x := min(max(int64(v), prev+1), hi)
			if x > prev {
				out = append(out, x)
				prev = x
			}
		}
		return out
	}
	step := float64(hi-lo+1) / float64(k+1)
	prev := lo - 1
	for i := 1; i <= k; i++ {
		x := min(lo+int64(float64(i)*step), hi)
		if x > prev {
			out = append(out, x)
			prev = x
		}
	}
	return out
}

// admitCand is one candidate interval of the every-call search: its busy
// span's start and calls, its full-again instant, and its bound g.
type admitCand struct {
	iv, tk, n, tat, g int64
}

// realCand is one real bucket: its burst window (burst × interval),
// interval, full-again instant and throttles.
type realCand struct {
	window, iv, tat, thr int64
}

// limitSearch is one bucket's searches.
type limitSearch struct {
	burst    int64 // B
	maxIv    int64 // the largest interval with burst B
	maxBurst int64 // the largest burst at the configured interval
	allowed  int64 // throttles within 0.1 %
	admit    span  // interval admitting every call at B
	rate999  span  // interval admitting 99.9 % at B
	burst999 span  // burst admitting 99.9 % at the configured interval

	batchAt, batchN int64
	admits          []admitCand
	rates, bursts   []realCand
	ivOf            []int64 // candidates, kept for the verdicts
}

func newLimitSearch(s *keyStats, lim bucket.Limit) *limitSearch {
	b := max(lim.Capacity(), s.peak)
	l := &limitSearch{burst: b, maxIv: maxWindow / b, allowed: s.tokens / 1000}
	dur := s.batchAt - s.firstAt // T, the last call's instant less the first's
	// (n − B)·I ≤ T: the whole log bounds the interval admitting all.
	l.admit = span{yes: 0, no: l.maxIv + 1}
	if s.tokens > b {
		l.admit.no = min(l.admit.no, dur/(s.tokens-b)+1)
	}
	// At most B + T/I calls pass: all but a of n need I ≤ T/(n − a − B).
	l.rate999 = span{yes: 0, no: l.maxIv + 1}
	if m := s.tokens - l.allowed - b; m > 0 {
		l.rate999.no = min(l.rate999.no, dur/m+1)
	}
	iv := int64(lim.Interval())
	l.maxBurst = maxWindow / iv
	// The exact burst admitting all at the configured rate admits 99.9 %;
	// a burst of n − a − T/I or less cannot.
	if s.need <= l.maxBurst {
		l.burst999 = span{yes: max(s.need, 1), no: 0}
	} else {
		l.burst999 = span{yes: l.maxBurst + 1, no: 0} // maxBurst+1: none known
	}
	if m := s.tokens - l.allowed - dur/iv - 1; m > 0 {
		l.burst999.no = min(m, l.burst999.yes-1)
	}
	return l
}

func (l *limitSearch) done() bool {
	return l.admit.done() && l.rate999.done() && l.burst999.done()
}

// prepare sets the candidates of the next play, k of each search.
func (l *limitSearch) prepare(k int, iv int64) {
	l.admits, l.rates, l.bursts = l.admits[:0], l.rates[:0], l.bursts[:0]
	l.batchN = 0
	var buf []int64
	if !l.admit.done() {
		// The bound first (Dinkelbach), then the range below it.
		buf = append(buf[:0], l.admit.no-1)
		buf = candidates(l.admit.yes+1, l.admit.no-2, k-1, buf)
		for _, c := range buf {
			l.admits = append(l.admits, admitCand{iv: c, g: math.MaxInt64})
		}
	}
	if !l.rate999.done() && l.admit.done() {
		lo := max(l.rate999.yes, l.admit.yes) + 1
		for _, c := range candidates(lo, l.rate999.no-1, k, buf[:0]) {
			l.rates = append(l.rates, realCand{window: l.burst * c, iv: c})
		}
	}
	if !l.burst999.done() {
		for _, c := range candidates(l.burst999.no+1, l.burst999.yes-1, k, buf[:0]) {
			l.bursts = append(l.bursts, realCand{window: c * iv, iv: iv})
		}
	}
}

// arrive takes one call at instant at, not before the previous.
func (l *limitSearch) arrive(at int64) {
	if l.batchN > 0 && at != l.batchAt {
		l.flush()
	}
	l.batchAt = at
	l.batchN++
}

// flush plays the calls of one instant on every candidate.
func (l *limitSearch) flush() {
	t, n := l.batchAt, l.batchN
	l.batchN = 0
	for i := range l.admits {
		c := &l.admits[i]
		if c.tat <= t { // full again: a new busy span
			c.tk, c.n, c.tat = t, 0, t
		}
		c.n += n
		c.tat = satAdd(c.tat, satMul(n, c.iv))
		// g = min(g, ⌊(t − tk)/(n − B)⌋), dividing only when it falls:
		// ⌊x/m⌋ < g iff x < g·m.
		if m := c.n - l.burst; m > 0 && t-c.tk < satMul(m, c.g) {
			c.g = (t - c.tk) / m
		}
	}
	for i := range l.rates {
		c := &l.rates[i]
		c.tat, c.thr = takeBatch(c.tat, c.thr, t, n, c.window, c.iv)
	}
	for i := range l.bursts {
		c := &l.bursts[i]
		c.tat, c.thr = takeBatch(c.tat, c.thr, t, n, c.window, c.iv)
	}
}

// conclude narrows the searches by the play's verdicts.
func (l *limitSearch) conclude() {
	if l.batchN > 0 {
		l.flush()
	}
	for _, c := range l.admits {
		if c.g >= c.iv { // admitted every call
			l.admit.yes = max(l.admit.yes, c.iv)
		}
		// g bounds I* whether or not c admitted (g ≥ I*).
		l.admit.no = min(l.admit.no, satAdd(c.g, 1))
		if c.g < c.iv {
			l.admit.no = min(l.admit.no, c.iv)
		}
	}
	if l.admit.no <= l.admit.yes { // cannot happen; never loop on it
		l.admit.no = l.admit.yes + 1
	}
	for _, c := range l.rates {
		if c.thr <= l.allowed {
			l.rate999.yes = max(l.rate999.yes, c.iv)
		} else {
			l.rate999.no = min(l.rate999.no, c.iv)
		}
	}
	l.rate999.yes = max(l.rate999.yes, l.admit.yes) // what admits all admits 99.9 %
	for _, c := range l.bursts {
		b := c.window / c.iv
		if c.thr <= l.allowed {
			l.burst999.yes = min(l.burst999.yes, b)
		} else {
			l.burst999.no = max(l.burst999.no, b)
		}
	}
}

// takeBatch takes n calls at t, one token each, from a bucket of burst
// window window (burst × interval) and interval iv whose full-again
// instant is tat, as n Takes of package bucket would: it admits as many as
// it holds tokens for.
func takeBatch(tat, thr, t, n, window, iv int64) (int64, int64) {
	tat = max(tat, t)
	room := t + window - tat // ≥ 0 for a bucket that only admits within its window
	if need := satMul(n, iv); need <= room {
		return tat + need, thr
	}
	a := min(max(room/iv, 0), n)
	return tat + a*iv, thr + n - a
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satMul returns n × iv, or math.MaxInt64 when that is larger; both are
// not negative.
func satMul(n, iv int64) int64 {
	hi, lo := bits.Mul64(uint64(n), uint64(iv))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// searchLimits plays the trace until the searches of every bucket of
// stats that is not nil end, and returns the searches (nil for the nil
// buckets: a report that lists few of many buckets searches only those)
// and the plays it took. limitOf returns the limit of a bucket.
func searchLimits(tr *traceWriter, stats []*keyStats, limitOf func(b int32) bucket.Limit) ([]*limitSearch, int, error) {
	ls := make([]*limitSearch, len(stats))
	n := 0
	for i, s := range stats {
		if s != nil {
			ls[i] = newLimitSearch(s, limitOf(int32(i)))
			n++
		}
	}
	k := searchWidth
	if n := n * 3; n*k > searchBudget {
		k = max(searchBudget/n, 2)
	}
	for plays := range maxPlays {
		open := false
		for i, l := range ls {
			if l != nil && !l.done() {
				l.prepare(k, int64(limitOf(int32(i)).Interval()))
				open = true
			}
		}
		if !open {
			return ls, plays, nil
		}
		err := tr.play(func(b int32, at int64, _ uint64, _ uint8) {
			if l := ls[b]; l != nil && len(l.admits)+len(l.rates)+len(l.bursts) > 0 {
				l.arrive(at)
			}
		})
		if err != nil {
			return nil, plays, err
		}
		for _, l := range ls {
			if l != nil && len(l.admits)+len(l.rates)+len(l.bursts) > 0 {
				l.conclude()
				l.admits, l.rates, l.bursts = l.admits[:0], l.rates[:0], l.bursts[:0]
			}
		}
	}
	return ls, maxPlays, nil
}

// rateOf returns the rate, written as the shortest decimal, whose interval
// at burst b is exactly iv nanoseconds; ok is false when there is none.
func rateOf(b, iv int64) (float64, bool) {
	if iv < 1 {
		return 0, false
	}
	lo := 1e9 / float64(iv) // the smallest rate of that interval
	for d := 0; d <= 17; d++ {
		p := math.Pow10(d)
		r, err := strconv.ParseFloat(strconv.FormatFloat(math.Ceil(lo*p)/p, 'f', d, 64), 64)
		if err != nil {
			continue
		}
		if l, err := bucket.NewLimit(b, r); err == nil && int64(l.Interval()) == iv {
			return r, true
		}
	}
	r := lo
	for range 8 {
		if l, err := bucket.NewLimit(b, r); err == nil && int64(l.Interval()) == iv {
			return r, true
		}
		r = math.Nextafter(r, math.Inf(1))
	}
	return 0, false
}

// fill writes the searches' results into a bucket's report.
func (l *limitSearch) fill(b *Bucket) {
	if l.admit.yes >= 1 {
		b.AdmitBurst = l.burst
		if l.admit.yes < l.maxIv {
			b.AdmitRate, _ = rateOf(l.burst, l.admit.yes)
		}
	}
	if y := l.rate999.yes; y >= 1 && y < l.maxIv {
		b.Rate999, _ = rateOf(l.burst, y)
	}
	if y := l.burst999.yes; y >= 1 && y <= l.maxBurst {
		b.Burst999 = y
	}
}
