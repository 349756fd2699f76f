package liveview

import (
	"container/heap"
	"hash/maphash"
)

// peakScale is the fixed-point scale of a bucket's use: use = used tokens
// * peakScale / capacity, so 0 is an untouched bucket and peakScale an
// empty one.
const peakScale = 1 << 20

// useOf is the fixed-point use of a bucket with used tokens of capacity.
func useOf(used, capacity int64) uint64 {
	if capacity <= 0 || used <= 0 {
		return 0
	}
	used = min(used, capacity)
	return uint64(used) * peakScale / uint64(capacity)
}

// peakTable keeps the cap keys whose buckets were used most, each with its
// peak: an exact top-cap by maximum. A key's score only grows, and a key
// enters a full table only with a score above the table's minimum, which
// it then replaces; so a key whose true peak is among the cap highest is
// always present with its true peak (ties aside), and any key absent
// peaked at most at floor. Many keys that each use their bucket a little
// (hostile cardinality: one request from each of a million accounts) can
// never push out one that used its bucket more.
//
// Entries form a min-heap by score, indexed by a 64-bit hash of the key's
// record like spaceSaving's.
type peakTable struct {
	cap  int
	seed maphash.Seed
	heap peakHeap
	idx  map[uint64]*peakNode
	free []*peakNode
}

type peakNode struct {
	rec            []byte
	score          uint64
	used, capacity int64
	hash           uint64
	pos            int
}

// peakEntry is a key of a closed table.
type peakEntry struct {
	rec            string // the key's record
	score          uint64
	used, capacity int64
}

func newPeakTable(capacity int) *peakTable {
	return &peakTable{cap: capacity, seed: maphash.MakeSeed(), heap: make(peakHeap, 0, capacity), idx: make(map[uint64]*peakNode, capacity)}
}

// add notes that the bucket of rec had used of capacity tokens in use.
func (p *peakTable) add(rec []byte, used, capacity int64) {
	score := useOf(used, capacity)
	if score == 0 {
		return
	}
	hash := maphash.Bytes(p.seed, rec)
	if e, ok := p.idx[hash]; ok {
		if score > e.score {
			e.score, e.used, e.capacity = score, used, capacity
			heap.Fix(&p.heap, e.pos)
		}
		return
	}
	if len(p.heap) < p.cap {
		var e *peakNode
		if k := len(p.free); k > 0 {
			e, p.free = p.free[k-1], p.free[:k-1]
		} else {
			e = &peakNode{}
		}
		*e = peakNode{rec: append(e.rec[:0], rec...), score: score, used: used, capacity: capacity, hash: hash}
		heap.Push(&p.heap, e)
		p.idx[hash] = e
		return
	}
	m := p.heap[0]
	if score <= m.score {
		return
	}
	delete(p.idx, m.hash)
	m.rec = append(m.rec[:0], rec...)
	m.score, m.used, m.capacity, m.hash = score, used, capacity, hash
	p.idx[hash] = m
	heap.Fix(&p.heap, 0)
}

// floor is the highest score a key absent from the table can have had:
// the minimum once the table is full, else 0 (every key is present).
func (p *peakTable) floor() uint64 {
	if len(p.heap) < p.cap || len(p.heap) == 0 {
		return 0
	}
	return p.heap[0].score
}

// entries returns the table's keys, in no particular order.
func (p *peakTable) entries() []peakEntry {
	out := make([]peakEntry, len(p.heap))
	for i, e := range p.heap {
		out[i] = peakEntry{rec: string(e.rec), score: e.score, used: e.used, capacity: e.capacity}
	}
	return out
}

// reset empties the table, keeping its nodes for reuse.
func (p *peakTable) reset() {
	p.free = append(p.free, p.heap...)
	clear(p.heap)
	p.heap = p.heap[:0]
	clear(p.idx)
}

// peakHeap is a min-heap of nodes by score for container/heap; each
// node knows its position, so a grown score is fixed in place.
type peakHeap []*peakNode

func (h peakHeap) Len() int           { return len(h) }
func (h peakHeap) Less(i, j int) bool { return h[i].score < h[j].score }
func (h peakHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *peakHeap) Push(x any) {
	e := x.(*peakNode)
	e.pos = len(*h)
	*h = append(*h, e)
}
func (h *peakHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
