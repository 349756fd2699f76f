// Package spacesaving is the Space-Saving summary of a stream of keys
// (Metwally, Agrawal and El Abbadi, "Efficient computation of frequent and
// top-k elements in data streams", 2005): the heavy hitters of a stream in
// memory bounded by a capacity, whatever the stream's length and number of
// distinct keys. liveview keeps the throttled keys of a second with it,
// replay the top callers and actions of a throttled bucket.
package spacesaving

import "hash/maphash"

// Summary holds at most its capacity of keys, each with a count that
// over-estimates its true count by at most its Err. A key whose true
// count exceeds total/capacity is always present. When fewer than
// capacity distinct keys were added, every count is exact.
//
// The entries form a min-heap by count; each knows its position, so
// adding costs one hash of the key, one map lookup and O(log capacity)
// swaps, and the minimum is the heap's first. Keys are bytes held in
// buffers the entries own and reuse, so adding allocates nothing once the
// summary has been full, and the summary pins no caller's memory. Entries
// are indexed by a 64-bit hash of the key; two keys with the same hash
// (odds about 1 in 10^19 per pair) would share an entry, under the first
// one's name.
//
// A Summary is not safe for concurrent use.
type Summary struct {
	cap  int
	seed maphash.Seed
	heap []*node
	idx  map[uint64]*node
	free []*node // nodes of a reset summary, with their buffers
}

type node struct {
	key        []byte
	count, err uint64
	hash       uint64
	pos        int // index in heap
}

// Entry is a key with its estimated count.
type Entry struct {
	// Key is the key, a copy of the summary's.
	Key []byte
	// Count is the estimated count, never below the true count; Err
	// bounds the over-estimate: Count − Err is never above the true count.
	Count, Err uint64
}

// New returns an empty summary of at most capacity keys (at least 1).
func New(capacity int) *Summary {
	capacity = max(capacity, 1)
	return &Summary{cap: capacity, seed: maphash.MakeSeed(), heap: make([]*node, 0, capacity), idx: make(map[uint64]*node, capacity)}
}

// Len returns how many keys the summary holds.
func (s *Summary) Len() int { return len(s.heap) }

// Add counts n occurrences of key, which it copies.
func (s *Summary) Add(key []byte, n uint64) {
	hash := maphash.Bytes(s.seed, key)
	if e, ok := s.idx[hash]; ok {
		e.count += n
		s.down(e.pos)
		return
	}
	if len(s.heap) < s.cap {
		var e *node
		if k := len(s.free); k > 0 {
			e, s.free = s.free[k-1], s.free[:k-1]
		} else {
			e = &node{}
		}
		*e = node{key: append(e.key[:0], key...), count: n, hash: hash, pos: len(s.heap)}
		s.heap = append(s.heap, e)
		s.idx[hash] = e
		s.up(e.pos)
		return
	}
	// Full: the new key replaces the minimum and inherits its count as
	// its error.
	m := s.heap[0]
	delete(s.idx, m.hash)
	m.key = append(m.key[:0], key...)
	m.count, m.err = m.count+n, m.count
	m.hash = hash
	s.idx[hash] = m
	s.down(0)
}

// Entries returns the summary's keys, in no particular order.
func (s *Summary) Entries() []Entry {
	out := make([]Entry, len(s.heap))
	for i, e := range s.heap {
		out[i] = Entry{Key: append([]byte(nil), e.key...), Count: e.count, Err: e.err}
	}
	return out
}

// Floor is the most a key absent from the summary can have been counted:
// the minimum count once the summary is full, else 0.
func (s *Summary) Floor() uint64 {
	if len(s.heap) < s.cap || len(s.heap) == 0 {
		return 0
	}
	return s.heap[0].count
}

// Reset empties the summary, keeping its nodes for reuse.
func (s *Summary) Reset() {
	s.free = append(s.free, s.heap...)
	clear(s.heap)
	s.heap = s.heap[:0]
	clear(s.idx)
}

func (s *Summary) less(i, j int) bool { return s.heap[i].count < s.heap[j].count }

func (s *Summary) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].pos, s.heap[j].pos = i, j
}

func (s *Summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Summary) down(i int) {
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
