package liveview

import (
	"strings"

	"github.com/tollgate/tollgate/quota"
)

// spaceSaving is the Space-Saving summary of a stream of keys: at most cap
// keys, each with a count that over-estimates its true count by at most
// err. A key whose true count exceeds total/cap is always present. When
// fewer than cap distinct keys were added, every count is exact.
//
// The entries form a min-heap by count, with idx mapping each key to its
// position, so adding is O(log cap) and the minimum is at entries[0].
type spaceSaving struct {
	cap     int
	entries []hotEntry
	idx     map[quota.Key]int
}

// hotEntry is one key of a summary.
type hotEntry struct {
	key   quota.Key
	count uint64 // estimated count, never below the true count
	err   uint64 // count - err is never above the true count
}

func newSpaceSaving(capacity int) *spaceSaving {
	return &spaceSaving{cap: capacity, entries: make([]hotEntry, 0, capacity), idx: make(map[quota.Key]int, capacity)}
}

// add counts n occurrences of k.
func (s *spaceSaving) add(k quota.Key, n uint64) {
	if i, ok := s.idx[k]; ok {
		s.entries[i].count += n
		s.down(i)
		return
	}
	// A new key's strings may point into a larger buffer (a batch body):
	// keep copies, so the summary pins no more memory than its own.
	// (Service and Category are the config's own names.)
	k.Account, k.Region = strings.Clone(k.Account), strings.Clone(k.Region)
	if len(s.entries) < s.cap {
		s.entries = append(s.entries, hotEntry{key: k, count: n})
		s.idx[k] = len(s.entries) - 1
		s.up(len(s.entries) - 1)
		return
	}
	// Full: the new key replaces the minimum and inherits its count as
	// its error.
	min := &s.entries[0]
	delete(s.idx, min.key)
	*min = hotEntry{key: k, count: min.count + n, err: min.count}
	s.idx[k] = 0
	s.down(0)
}

// floor is the most a key absent from the summary can have been counted:
// the minimum count once the summary is full, else 0.
func (s *spaceSaving) floor() uint64 {
	if len(s.entries) < s.cap || len(s.entries) == 0 {
		return 0
	}
	return s.entries[0].count
}

func (s *spaceSaving) reset() {
	s.entries = s.entries[:0]
	clear(s.idx)
}

func (s *spaceSaving) less(i, j int) bool { return s.entries[i].count < s.entries[j].count }

func (s *spaceSaving) swap(i, j int) {
	s.entries[i], s.entries[j] = s.entries[j], s.entries[i]
	s.idx[s.entries[i].key] = i
	s.idx[s.entries[j].key] = j
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
	n := len(s.entries)
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
