package liveview

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"

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
// and the minimum is heap[0]. Keys are held in their record form (see
// appendRecord), in buffers the entries own and reuse, so adding a key
// allocates nothing once the summary has been full, and the summary pins
// no caller's memory. Entries are indexed by a 64-bit hash of the record;
// two keys with the same hash (odds about 1 in 10^19 per pair) would
// share an entry, under the first one's name.
type spaceSaving struct {
	cap  int
	seed maphash.Seed
	heap []*hotNode
	idx  map[uint64]*hotNode
	free []*hotNode // nodes of a reset summary, with their buffers
	rec  []byte     // scratch for add
}

// hotNode is one key of a summary.
type hotNode struct {
	rec        []byte // the key's record
	count, err uint64
	hash       uint64
	pos        int // index in heap
}

// hotEntry is a key with its estimated count.
type hotEntry struct {
	key   quota.Key
	count uint64 // estimated count, never below the true count
	err   uint64 // count - err is never above the true count
}

// recordHeader is the size of a record's header: the lengths of the key's
// four fields, two bytes each.
const recordHeader = 8

// recordLen is the size of k's record.
func recordLen(k quota.Key) int {
	return recordHeader + len(k.Service) + len(k.Account) + len(k.Region) + len(k.Category)
}

// appendRecord appends k's record to b: the lengths of its service,
// account, region and category (little-endian uint16 each), then their
// bytes. Every field must be shorter than 64 KiB.
func appendRecord(b []byte, k quota.Key) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(k.Service)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(k.Account)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(k.Region)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(k.Category)))
	b = append(b, k.Service...)
	b = append(b, k.Account...)
	b = append(b, k.Region...)
	return append(b, k.Category...)
}

// nextRecord splits the first record off b, which must start with a
// whole record.
func nextRecord(b []byte) (rec, rest []byte) {
	n := recordHeader
	for i := range 4 {
		n += int(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return b[:n], b[n:]
}

// decodeRecord returns the key of a record, its four strings sharing one
// allocation.
func decodeRecord(rec []byte) quota.Key {
	var n [4]int
	for i := range n {
		n[i] = int(binary.LittleEndian.Uint16(rec[2*i:]))
	}
	s := string(rec[recordHeader:])
	return quota.Key{Service: s[:n[0]], Account: s[n[0] : n[0]+n[1]],
		Region: s[n[0]+n[1] : n[0]+n[1]+n[2]], Category: s[n[0]+n[1]+n[2]:]}
}

func newSpaceSaving(capacity int) *spaceSaving {
	return &spaceSaving{cap: capacity, seed: maphash.MakeSeed(), heap: make([]*hotNode, 0, capacity), idx: make(map[uint64]*hotNode, capacity)}
}

// hash hashes a key.
func (s *spaceSaving) hash(k quota.Key) uint64 {
	s.rec = appendRecord(s.rec[:0], k)
	return maphash.Bytes(s.seed, s.rec)
}

// add counts n occurrences of k.
func (s *spaceSaving) add(k quota.Key, n uint64) {
	s.rec = appendRecord(s.rec[:0], k)
	s.addRecord(s.rec, n)
}

// addRecords counts every record of b, a run of records as appendRecord
// writes them. Equal records in a row are counted at once.
func (s *spaceSaving) addRecords(b []byte) {
	var prev []byte
	var n uint64
	for len(b) > 0 {
		var rec []byte
		rec, b = nextRecord(b)
		if n > 0 && bytes.Equal(rec, prev) {
			n++
			continue
		}
		if n > 0 {
			s.addRecord(prev, n)
		}
		prev, n = rec, 1
	}
	if n > 0 {
		s.addRecord(prev, n)
	}
}

// addRecord counts n occurrences of the key of rec.
func (s *spaceSaving) addRecord(rec []byte, n uint64) {
	hash := maphash.Bytes(s.seed, rec)
	if e, ok := s.idx[hash]; ok {
		e.count += n
		s.down(e.pos)
		return
	}
	if len(s.heap) < s.cap {
		var e *hotNode
		if k := len(s.free); k > 0 {
			e, s.free = s.free[k-1], s.free[:k-1]
		} else {
			e = &hotNode{}
		}
		*e = hotNode{rec: append(e.rec[:0], rec...), count: n, hash: hash, pos: len(s.heap)}
		s.heap = append(s.heap, e)
		s.idx[hash] = e
		s.up(e.pos)
		return
	}
	// Full: the new key replaces the minimum and inherits its count as
	// its error.
	m := s.heap[0]
	delete(s.idx, m.hash)
	m.rec = append(m.rec[:0], rec...)
	m.count, m.err = m.count+n, m.count
	m.hash = hash
	s.idx[hash] = m
	s.down(0)
}

// entries returns the summary's keys, in no particular order, with
// strings of their own.
func (s *spaceSaving) entries() []hotEntry {
	out := make([]hotEntry, len(s.heap))
	for i, e := range s.heap {
		out[i] = hotEntry{key: decodeRecord(e.rec), count: e.count, err: e.err}
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

// reset empties the summary, keeping its nodes for reuse.
func (s *spaceSaving) reset() {
	s.free = append(s.free, s.heap...)
	clear(s.heap)
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
