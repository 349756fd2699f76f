package autoscale

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
)

// SplitSlots is the number of slots of a Split: one per percent.
const SplitSlots = 100

// splitStride is coprime with SplitSlots: n·splitStride mod 100 visits
// every slot once in 100 consecutive requests.
const splitStride = 37

// ErrInvalidSplit is wrapped by NewSplit's errors.
var ErrInvalidSplit = errors.New("autoscale: invalid traffic split")

// Split is a service's traffic split over its revisions by whole
// percents, as Cloud Run's and Knative's traffic blocks give it: a
// weighted round robin over 100 slots. Entry i of the percents takes
// percents[i] consecutive slots, in order; the n-th request takes slot
// n·37 mod 100, so every 100 requests in a row give each entry exactly
// its percent, interleaved rather than in runs. It is a value, pure and
// safe to share; the pool and the simulator split by it alike.
type Split struct {
	slots [SplitSlots]uint8 // the entry of each slot
	n     int               // entries
}

// NewSplit lays percents (each in [0, 100], summing to 100, at most 100
// entries) over the slots; the error wraps ErrInvalidSplit.
func NewSplit(percents []int) (Split, error) {
	var s Split
	if len(percents) == 0 || len(percents) > SplitSlots {
		return s, fmt.Errorf("%w: %d entries, want 1 to %d", ErrInvalidSplit, len(percents), SplitSlots)
	}
	slot := 0
	for i, p := range percents {
		if p < 0 || p > SplitSlots || slot+p > SplitSlots {
			return s, fmt.Errorf("%w: entry %d: percent %d not in [0, 100] or the sum over 100", ErrInvalidSplit, i, p)
		}
		for range p {
			s.slots[slot] = uint8(i)
			slot++
		}
	}
	if slot != SplitSlots {
		return s, fmt.Errorf("%w: percents sum to %d, not 100", ErrInvalidSplit, slot)
	}
	s.n = len(percents)
	return s, nil
}

// SplitSlot is the slot the n-th request takes: n·37 mod 100.
func SplitSlot(n uint64) int { return int(n * splitStride % SplitSlots) }

// Entry is the entry that holds slot (0 to 99).
func (s *Split) Entry(slot int) int { return int(s.slots[slot]) }

// Pick is the entry the n-th request goes to: the entry of SplitSlot(n).
func (s *Split) Pick(n uint64) int { return int(s.slots[SplitSlot(n)]) }

// Entries is the number of entries the split was made of.
func (s *Split) Entries() int { return s.n }

// StickyPoint is the point in [0, SplitSlots) a client's key hashes to:
// the 64-bit FNV-1a of the key, mixed by MurmurHash3's 64-bit finalizer
// (FNV-1a alone barely moves its top bits for keys that differ in their
// last byte, such as user-1 and user-2), scaled to [0, 100) by its top
// bits. It has no seed: the same key gives the same point in every
// process, on every machine, in every run.
func StickyPoint(key string) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	hi, _ := bits.Mul64(x, SplitSlots)
	return int(hi)
}

// PickKey is the entry a client with key goes to when the split is
// sticky: the one whose run of consecutive slots holds StickyPoint(key).
// The same key lands on the same entry while the percents stay the
// same, and the share of distinct keys per entry approaches its percent.
// Entries hold their slots in the order of the percents, so when the
// percents change with that order kept, a key moves only if a boundary
// crossed its point: with two entries, only toward the one that grows
// (a rollout 10 → 50 → 100 % moves 40 %, then the other 50 %, of the
// keys, each once, never back). Callers keep the order stable (the pool
// and the simulator lay revisions oldest first), whatever order a
// traffic block lists them in.
func (s *Split) PickKey(key string) int { return int(s.slots[StickyPoint(key)]) }
