package autoscale

import (
	"errors"
	"fmt"
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
