package replay

// This file keeps one bucket's numbers as its calls are played: the
// throttles without retries, the minutes, and the limits that would have
// admitted every call (and 99.9 % of them), in O(1) memory per bucket.
//
// The smallest admitting burst is exact. A bucket of interval I (the time
// between two tokens) admits every call of a sequence iff, for every call
// j, tat_j − t_j ≤ B·I, where tat_j = max(tat_{j−1}, t_j) + I is the
// bucket's "full again" instant had it admitted everything (GCRA, as
// package bucket keeps it). So the smallest burst at a given rate is
// max_j ⌈(tat_j − t_j)/I⌉, one pass with one number of state. Calls at one
// instant (CloudTrail records times to the second) are taken together.
//
// Rates are searched on a ladder, the configured rate times rateLadder:
// for each, the exact burst it needs. The recommended limit is the
// smallest ladder rate whose burst is no more than the configured burst or
// the most calls made at one instant, whichever is larger (no burst below
// that admits them all), with that burst. For 99.9 %, real buckets (a
// throttled call takes no token) run at the configured burst with each
// ladder rate, and at the configured rate with each burst of burstLadder.

import (
	"math"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
)

// rateLadder and burstLadder are the multiples of the configured rate and
// burst searched.
var (
	rateLadder  = []float64{1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12.5, 15, 20, 25, 30, 40, 50, 60, 80, 100}
	burstLadder = []float64{1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 100}
)

// saturate bounds a debt in nanoseconds: a rate so far below the traffic
// needs a burst past any limit bucket accepts anyway.
const saturate = int64(1) << 61

type keyStats struct {
	key   quota.Key
	limit bucket.Limit
	group int32

	calls, throttled, recorded          int64
	attempts, throttledAttempts, failed int64
	noRetry                             bucket.State

	batchAt, batchN, peak int64

	minute, minuteCount int64
	firstMin, worstMin  int64
	worstCount, minutes int64

	iv      []int64 // interval of each ladder rate
	needTat []int64 // unbounded bucket per ladder rate
	need    []int64 // the burst each ladder rate needs
	rateTat []int64 // real bucket, configured burst, ladder rate
	rateThr []int64
	capB    []int64 // burst ladder at the configured rate
	capTat  []int64
	capThr  []int64
}

func newKeyStats(k quota.Key, l bucket.Limit, g int32) *keyStats {
	s := &keyStats{key: k, limit: l, group: g}
	n := len(rateLadder)
	s.iv = make([]int64, n)
	s.needTat, s.need = make([]int64, n), make([]int64, n)
	s.rateTat, s.rateThr = make([]int64, n), make([]int64, n)
	for i, m := range rateLadder {
		s.iv[i] = int64(l.Interval())
		if i > 0 {
			if ll, err := bucket.NewLimit(1, l.RefillPerSecond()*m); err == nil {
				s.iv[i] = int64(ll.Interval())
			}
		}
	}
	nb := len(burstLadder)
	s.capB, s.capTat, s.capThr = make([]int64, nb), make([]int64, nb), make([]int64, nb)
	for i, m := range burstLadder {
		s.capB[i] = int64(math.Ceil(float64(l.Capacity()) * m))
	}
	return s
}

// arrive counts one call played at instant at, in time order.
func (s *keyStats) arrive(at int64) {
	s.calls++
	st, d := s.limit.TakeAt(s.noRetry, at, 1)
	if d.Allowed {
		s.noRetry = st
	} else {
		s.throttled++
		s.countThrottle(at)
	}
	if s.batchN > 0 && at != s.batchAt {
		s.flush()
	}
	s.batchAt = at
	s.batchN++
}

func (s *keyStats) countThrottle(at int64) {
	m := minuteOf(at)
	if s.firstMin == 0 {
		s.firstMin = m
	}
	if m != s.minute {
		s.closeMinute()
		s.minute = m
	}
	s.minuteCount++
}

func (s *keyStats) closeMinute() {
	if s.minuteCount > 0 {
		s.minutes++
	}
	if s.minuteCount > s.worstCount {
		s.worstMin, s.worstCount = s.minute, s.minuteCount
	}
	s.minuteCount = 0
}

// flush plays the calls made at one instant on the ladders.
func (s *keyStats) flush() {
	t, n := s.batchAt, s.batchN
	s.batchN = 0
	s.peak = max(s.peak, n)
	for i, iv := range s.iv {
		tat := max(s.needTat[i], t)
		if debt := tat - t + n*iv; debt < saturate && n*iv/n == iv {
			tat = t + debt
		} else {
			tat = t + saturate
		}
		s.needTat[i] = tat
		s.need[i] = max(s.need[i], (tat-t+iv-1)/iv)
		s.rateTat[i], s.rateThr[i] = takeBatch(s.rateTat[i], s.rateThr[i], t, n, s.limit.Capacity(), iv)
	}
	iv := int64(s.limit.Interval())
	for i, b := range s.capB {
		s.capTat[i], s.capThr[i] = takeBatch(s.capTat[i], s.capThr[i], t, n, b, iv)
	}
}

// takeBatch takes n calls at t, one token each, from a bucket of burst b
// and interval iv whose full-again instant is tat, as n Takes of package
// bucket would: it admits as many as it holds tokens for.
func takeBatch(tat, thr, t, n, b, iv int64) (int64, int64) {
	tat = max(tat, t)
	held := (t + min(b*iv, saturate) - tat) / iv
	a := min(max(held, 0), n)
	return tat + a*iv, thr + n - a
}

// finish closes the last instant and minute.
func (s *keyStats) finish() {
	if s.batchN > 0 {
		s.flush()
	}
	s.closeMinute()
}

// admitting returns the recommended limit that admits every call, and
// whether there is one on the ladder.
func (s *keyStats) admitting() (bucket.Limit, bool) {
	floor := max(s.limit.Capacity(), s.peak)
	for i, m := range rateLadder {
		if s.need[i] > floor {
			continue
		}
		l, err := bucket.NewLimit(max(s.need[i], s.limit.Capacity()), s.rate(i, m))
		if err == nil {
			return l, true
		}
	}
	last := len(rateLadder) - 1
	l, err := bucket.NewLimit(max(s.need[last], s.limit.Capacity()), s.rate(last, rateLadder[last]))
	return l, err == nil
}

func (s *keyStats) rate(i int, m float64) float64 {
	if i == 0 {
		return s.limit.RefillPerSecond()
	}
	return s.limit.RefillPerSecond() * m
}

// most999 returns the smallest ladder rate at the configured burst, and
// the smallest ladder burst at the configured rate, that admit 99.9 % of
// the calls; 0 for none on the ladder.
func (s *keyStats) most999() (rate float64, burst int64) {
	allowed := s.calls / 1000 // throttles within 0.1 %
	for i, m := range rateLadder {
		if s.rateThr[i] <= allowed {
			rate = s.rate(i, m)
			break
		}
	}
	for i, b := range s.capB {
		if s.capThr[i] <= allowed {
			burst = b
			break
		}
	}
	return rate, burst
}
