package traffic

import (
	"slices"

	"github.com/tollgate/tollgate/autoscale"
)

// Routing is one service's traffic block resolved to its revisions (of
// any type R: the pool's own): which revision each request takes. It is
// made whole by NewRouting and never changed, so that it can be swapped
// under the requests that read it. It is safe for concurrent use.
type Routing[R comparable] struct {
	// slots give each revision its percent of 100 slots, as
	// autoscale.Split lays them out; the n-th request takes slot
	// autoscale.SplitSlot(n) (n·37 mod 100), so every 100 requests in a
	// row give each revision exactly its percent, interleaved.
	slots [100]R
	// keyed are the slots of sticky requests (PickKey): the same shares
	// laid oldest revision first (keyedSlots).
	keyed [100]R
	tags  map[string]R
}

// NewRouting resolves block, whose entry i goes to revision targets[i]:
// each takes its percent of the slots, sticky slots laid oldest revision
// first (their order in oldestFirst), and its tag. A block whose percents
// do not sum to 100 (one Check refuses) sends every request to fallback.
func NewRouting[R comparable](block []Target, targets []R, fallback R, oldestFirst []R) *Routing[R] {
	rt := &Routing[R]{tags: map[string]R{}}
	percents := make([]int, len(block))
	for i, e := range block {
		percents[i] = e.Percent
		if e.Tag != "" {
			rt.tags[e.Tag] = targets[i]
		}
	}
	// The slots as autoscale.Split lays them out, the simulator's
	// arithmetic.
	split, err := autoscale.NewSplit(percents)
	keyed, kerr := keyedSlots(oldestFirst, targets, percents)
	for s := range rt.slots {
		rt.slots[s], rt.keyed[s] = fallback, fallback
		if err == nil {
			rt.slots[s] = targets[split.Entry(s)]
		}
		if kerr == nil {
			rt.keyed[s] = keyed[s]
		}
	}
	return rt
}

// Pick returns the revision of the n-th untagged request: the slot
// autoscale.SplitSlot gives it.
func (rt *Routing[R]) Pick(n uint64) R {
	return rt.slots[autoscale.SplitSlot(n)]
}

// PickKey returns the revision of a sticky request with client key key:
// the one whose range holds autoscale.StickyPoint(key).
func (rt *Routing[R]) PickKey(key string) R {
	return rt.keyed[autoscale.StickyPoint(key)]
}

// Tagged returns the revision with tag, and false when none has it.
func (rt *Routing[R]) Tagged(tag string) (R, bool) {
	rv, ok := rt.tags[tag]
	return rv, ok
}

// Shares is the percent of untagged requests each revision takes.
func (rt *Routing[R]) Shares() map[R]int {
	out := map[R]int{}
	for _, rv := range rt.slots {
		out[rv]++
	}
	return out
}

// TagsOf are rv's tags, sorted; empty, not nil, when it has none.
func (rt *Routing[R]) TagsOf(rv R) []string {
	tags := []string{}
	for tag, t := range rt.tags {
		if t == rv {
			tags = append(tags, tag)
		}
	}
	slices.Sort(tags)
	return tags
}

// keyedSlots lays targets (revision i takes percents[i]) over 100 slots
// for sticky requests: as autoscale.Split lays them, with the targets
// ordered oldest revision first (their order in revs, the entries'
// order among one revision's), whatever order the traffic block lists
// them in. A share that grows while the one before it shrinks then
// takes points from its neighbour and never swaps them: in a rollout of
// a new revision, clients only move to it. percents sum to 100.
func keyedSlots[R comparable](revs []R, targets []R, percents []int) ([100]R, error) {
	var slots [100]R
	order := make([]int, len(targets))
	for i := range order {
		order[i] = i
	}
	age := func(rv R) int {
		if i := slices.Index(revs, rv); i >= 0 {
			return i
		}
		return len(revs)
	}
	slices.SortStableFunc(order, func(a, b int) int { return age(targets[a]) - age(targets[b]) })
	sorted := make([]int, len(order))
	for i, e := range order {
		sorted[i] = percents[e]
	}
	split, err := autoscale.NewSplit(sorted)
	if err != nil {
		return slots, err
	}
	for s := range slots {
		slots[s] = targets[order[split.Entry(s)]]
	}
	return slots, nil
}
