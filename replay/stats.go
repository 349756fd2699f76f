package replay

// This file keeps one bucket's numbers as its calls are played: the
// throttles without retries, the minutes, the most calls at one instant,
// and the smallest burst that admits every call at the configured rate,
// in O(1) memory per bucket. The smallest limits at other rates and for
// 99.9 % of the calls are searched after the replay (limits.go).
//
// The smallest admitting burst at the configured rate is exact. A bucket
// of interval I (the time between two tokens) admits every call of a
// sequence iff, for every call j, tat_j − t_j ≤ B·I, where tat_j =
// max(tat_{j−1}, t_j) + I is the bucket's "full again" instant had it
// admitted everything (GCRA, as package bucket keeps it). So the smallest
// burst is max_j ⌈(tat_j − t_j)/I⌉, one pass with one number of state.
// Calls at one instant (CloudTrail records times to the second) are taken
// together.

import (
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
)

// saturate bounds a debt in nanoseconds: a rate so far below the traffic
// needs a burst past any limit bucket accepts anyway.
const saturate = int64(1) << 61

// keyStats is one bucket's numbers. The buckets' are one slice of them,
// indexed by bucket (a million tenants are a million buckets): what only a
// throttled bucket needs, its minutes, is kept apart (minuteStats), for
// the throttled ones only.
type keyStats struct {
	key   bucketKey // its limit is the player's (sim.Player.Limit), held once
	group int32
	next  int32 // the next bucket of the same key hash, or -1 (run.bucket)
	mins  int32 // its minuteStats in run.minutes, plus 1; 0 until throttled

	calls, throttled, recorded          int64
	tokens                              int64 // taken by the calls: calls, or tasks for Fargate's tasks buckets
	attempts, throttledAttempts, failed int64
	noRetry                             bucket.State

	batchAt, batchN, peak int64
	firstAt               int64 // the first call's instant

	needTat, need int64 // unbounded bucket at the configured rate, and its burst
}

// minuteStats are a throttled bucket's minutes: the minute being counted
// and its throttles, the first and the worst minute, and the minutes with
// a throttle.
type minuteStats struct {
	minute, minuteCount int64
	firstMin, worstMin  int64
	worstCount, minutes int64
}

// throttledMinutes are the minuteStats of the throttled buckets.
type throttledMinutes []minuteStats

// of returns the minutes of s, adding them on its first throttle.
func (m *throttledMinutes) of(s *keyStats) *minuteStats {
	if s.mins == 0 {
		*m = append(*m, minuteStats{})
		s.mins = int32(len(*m))
	}
	return &(*m)[s.mins-1]
}

// get returns the minutes of s, the zero minuteStats when it was never
// throttled.
func (m throttledMinutes) get(s *keyStats) minuteStats {
	if s.mins == 0 {
		return minuteStats{}
	}
	return m[s.mins-1]
}

// statChunk is how many buckets' numbers a chunk of a statTable holds.
const statChunk = 4096

// statTable is the buckets' numbers, indexed by bucket, in chunks of
// statChunk: growing it never copies what it holds, so a million buckets
// never need room for two copies of their numbers at once.
type statTable struct {
	chunks [][]keyStats
	n      int
	names  keyNames
}

// bucketKey is a bucket's quota.Key as the table holds it: the account,
// and the service, region and category as ids of names held once
// (statTable.names), 28 bytes rather than 64.
type bucketKey struct {
	account                   string
	service, region, category uint32
}

// keyNames are the services', regions' and categories' names of the
// buckets' keys, each held once.
type keyNames struct {
	names []string
	ids   map[string]uint32
}

// id returns the id of name s, adding it on first sight.
func (n *keyNames) id(s string) uint32 {
	if id, ok := n.ids[s]; ok {
		return id
	}
	if n.ids == nil {
		n.ids = map[string]uint32{}
	}
	id := uint32(len(n.names))
	n.names = append(n.names, s)
	n.ids[s] = id
	return id
}

// intern returns the bucketKey of k.
func (t *statTable) intern(k quota.Key) bucketKey {
	return bucketKey{account: k.Account, service: t.names.id(k.Service), region: t.names.id(k.Region), category: t.names.id(k.Category)}
}

// key returns the quota.Key of bucket i.
func (t *statTable) key(i int) quota.Key {
	k := t.at(i).key
	return quota.Key{Service: t.names.names[k.service], Account: k.account, Region: t.names.names[k.region], Category: t.names.names[k.category]}
}

// len returns the number of buckets.
func (t *statTable) len() int { return t.n }

// at returns the numbers of bucket i.
func (t *statTable) at(i int) *keyStats { return &t.chunks[i/statChunk][i%statChunk] }

// add appends the numbers of a new bucket.
func (t *statTable) add(s keyStats) {
	if t.n%statChunk == 0 {
		t.chunks = append(t.chunks, make([]keyStats, 0, statChunk))
	}
	c := &t.chunks[len(t.chunks)-1]
	*c = append(*c, s)
	t.n++
}

func newKeyStats(k bucketKey, g int32) keyStats {
	return keyStats{key: k, group: g, next: -1}
}

// arrive counts one call of one token played at instant at, in time
// order, and whether the bucket alone would throttle it without retries;
// it reports whether it was allowed. l is the bucket's limit.
func (s *keyStats) arrive(at int64, l bucket.Limit, m *throttledMinutes) bool {
	s.count(at, 1, int64(l.Interval()))
	st, d := l.TakeAt(s.noRetry, at, 1)
	if d.Allowed {
		s.noRetry = st
	} else {
		s.throttle(at, m)
	}
	return d.Allowed
}

// count counts one call of n tokens played at instant at, in time order:
// the call, and its tokens towards the most taken at one instant and the
// smallest admitting burst. Whether it was throttled is counted apart
// (throttle): a call of several buckets is throttled all or none. iv is
// the interval of the bucket's limit.
func (s *keyStats) count(at, n, iv int64) {
	if s.calls == 0 {
		s.firstAt = at
	}
	s.calls++
	s.tokens += n
	if s.batchN > 0 && at != s.batchAt {
		s.flush(iv)
	}
	s.batchAt = at
	s.batchN += n
}

// throttle counts a call throttled without retries at instant at.
func (s *keyStats) throttle(at int64, m *throttledMinutes) {
	s.throttled++
	m.of(s).countThrottle(at)
}

func (s *minuteStats) countThrottle(at int64) {
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

func (s *minuteStats) closeMinute() {
	if s.minuteCount > 0 {
		s.minutes++
	}
	if s.minuteCount > s.worstCount {
		s.worstMin, s.worstCount = s.minute, s.minuteCount
	}
	s.minuteCount = 0
}

// flush takes the calls made at one instant from the unbounded bucket of
// interval iv.
func (s *keyStats) flush(iv int64) {
	t, n := s.batchAt, s.batchN
	s.batchN = 0
	s.peak = max(s.peak, n) // tokens at one instant
	tat := max(s.needTat, t)
	if debt := tat - t + n*iv; debt < saturate && n*iv/n == iv {
		tat = t + debt
	} else {
		tat = t + saturate
	}
	s.needTat = tat
	s.need = max(s.need, (tat-t+iv-1)/iv)
}

// finish closes the last instant and minute; l is the bucket's limit.
func (s *keyStats) finish(l bucket.Limit, m throttledMinutes) {
	if s.batchN > 0 {
		s.flush(int64(l.Interval()))
	}
	if s.mins != 0 {
		m[s.mins-1].closeMinute()
	}
}
