package liveview

import (
	"hash/maphash"
	"strings"

	"github.com/tollgate/tollgate/quota"
)

// spaceSaving is the Space-Saving summary of a stream of keys (Metwally,
// Agrawal and El Abbadi, "Efficient computation of frequent and top-k
// elements in data streams", 2005): at most cap keys, each with a count
// that over-estimates its true count by at most err. A key whose true
// count exceeds total/cap is always present. When fewer than cap distinct
// keys were added, every count is exact.
//
// The entries form a min-heap by count; each knows its position, so
// adding costs one hash of the key, one map lookup and O(log cap) swaps,
// and the minimum is heap[0]. Entries are indexed by a 64-bit hash of the
// key, computed once per add; two keys with the same hash (odds about
// 1 in 10^19 per pair) would share an entry, under the first one's name.
type spaceSaving struct {
	cap  int
	seed maphash.Seed
	heap []*hotNode
	idx  map[uint64]*hotNode
}

// hotNode is one key of a summary.
type hotNode struct {
	hotEntry
	hash uint64
	pos  int // index in heap
}

// hotEntry is a key with its estimated count.
type hotEntry struct {
	key   quota.Key
	count uint64 // estimated count, never below the true count
	err   uint64 // count - err is never above the true count
}

func newSpaceSaving(capacity int) *spaceSaving {
	return &spaceSaving{cap: capacity, seed: maphash.MakeSeed(), heap: make([]*hotNode, 0, capacity), idx: make(map[uint64]*hotNode, capacity)}
}

// hash hashes a key.
func (s *spaceSaving) hash(k quota.Key) uint64 { return maphash.Comparable(s.seed, k) }

// add counts n occurrences of k.
func (s *spaceSaving) add(k quota.Key, n uint64) {
	hash := s.hash(k)
	if e, ok := s.idx[hash]; ok {
		e.count += n
		s.down(e.pos)
		return
	}
	if len(s.heap) < s.cap {
		e := &hotNode{hotEntry: hotEntry{key: k, count: n}, hash: hash, pos: len(s.heap)}
		s.heap = append(s.heap, e)
		s.idx[hash] = e
		s.up(e.pos)
		return
	}
	// Full: the new key replaces the minimum and inherits its count as
	// its error.
	m := s.heap[0]
	delete(s.idx, m.hash)
	m.hotEntry = hotEntry{key: k, count: m.count + n, err: m.count}
	m.hash = hash
	s.idx[hash] = m
	s.down(0)
}

// entries returns a copy of the summary's keys, in no particular order.
//
// The summary keeps the keys it was given, whose strings may point into a
// larger buffer (a batch body); the copies get their own strings, so a
// closed second pins no more memory than its keys. (Service and Category
// are the config's own names.) Copying here rather than in add costs at
// most cap allocations per second instead of one per evicting add.
func (s *spaceSaving) entries() []hotEntry {
	out := make([]hotEntry, len(s.heap))
	for i, e := range s.heap {
		out[i] = e.hotEntry
		k := &out[i].key
		both := strings.Clone(k.Account + k.Region)
		k.Account, k.Region = both[:len(k.Account)], both[len(k.Account):]
	}
	return out
}

// floor is the most a key absent from the summary can have been counted:
// the minimum count once the summary is full, else 0.
func (s *spaceSaving) floor() uint64 {
	if len(s.heap) < s.cap || len(s.heap) == 0 {
		return 0
	}
	return s.heap[0].count
}

func (s *spaceSaving) reset() {
	s.heap = s.heap[:0]
	clear(s.idx)
}

func (s *spaceSaving) less(i, j int) bool { return s.heap[i].count < s.heap[j].count }

func (s *spaceSaving) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].pos, s.heap[j].pos = i, j
}

func (s *spaceSaving) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *spaceSaving) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.swap(i, m)
		i = m
	}
}
