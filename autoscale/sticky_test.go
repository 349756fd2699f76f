package autoscale

import (
	"fmt"
	"testing"
)

func mustSplit(t *testing.T, percents ...int) Split {
	t.Helper()
	s, err := NewSplit(percents)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// 10,000 distinct keys over 90/10 land within 120 of 9,000/1,000: the
// count on the 10 % is binomial(10,000, 0.1) for a uniform hash, σ =
// √(10,000·0.1·0.9) = 30, so 120 is 4σ (a uniform hash misses it with
// probability 6·10⁻⁵; the hash is fixed, so the test is deterministic).
// The same holds for keys that differ only in their last characters,
// and for each of the 100 points: every point gets 100 ± 40 keys (4σ).
func TestPickKeyFractionMatchesPercents(t *testing.T) {
	s := mustSplit(t, 90, 10)
	for _, format := range []string{"user-%d", "%d", "10.0.%d.1", "session-%08x"} {
		got := [2]int{}
		points := make([]int, SplitSlots)
		for i := range 10_000 {
			key := fmt.Sprintf(format, i)
			got[s.PickKey(key)]++
			points[StickyPoint(key)]++
		}
		if got[1] < 1000-120 || got[1] > 1000+120 {
			t.Errorf("keys %q: 90/10 gave %v, want 9,000/1,000 ± 120", format, got)
		}
		for pt, n := range points {
			if n < 100-40 || n > 100+40 {
				t.Errorf("keys %q: point %d has %d of 10,000 keys, want 100 ± 40", format, pt, n)
			}
		}
	}
}

// A key's point is fixed (no seed): a known key gives a known point, and
// the same key always the same entry.
func TestPickKeySameKeySameEntry(t *testing.T) {
	s := mustSplit(t, 50, 50)
	first := map[string]int{}
	for round := range 3 {
		for i := range 1000 {
			key := fmt.Sprintf("client-%d", i)
			e := s.PickKey(key)
			if round == 0 {
				first[key] = e
			} else if first[key] != e {
				t.Fatalf("key %s: entry %d, then %d", key, first[key], e)
			}
		}
	}
	// Pinned (computed apart, in Python, from FNV-1a and the finalizer)
	// so that a change of the hash, which would move every client of
	// every sticky service on upgrade, fails here.
	for key, want := range map[string]int{"": 93, "alice": 20, "bob": 96} {
		if got := StickyPoint(key); got != want {
			t.Errorf("StickyPoint(%q) = %d, want %d", key, got, want)
		}
	}
}

// A rollout 10 → 50 → 100 % with the entries kept in order (old, new)
// moves keys only toward the new revision, each once; about 40 % of the
// keys at the first step (the boundary moved from 90 to 50) and the rest
// at the second.
func TestPickKeyRolloutMovesTowardGrowingEntry(t *testing.T) {
	steps := []Split{mustSplit(t, 90, 10), mustSplit(t, 50, 50), mustSplit(t, 0, 100)}
	const keys = 10_000
	moved := make([]int, len(steps))
	for i := range keys {
		key := fmt.Sprintf("user-%d", i)
		prev := steps[0].PickKey(key)
		for j, s := range steps[1:] {
			e := s.PickKey(key)
			if prev == 1 && e == 0 {
				t.Fatalf("key %s moved back from the new revision to the old at step %d", key, j+1)
			}
			if e != prev {
				moved[j+1]++
			}
			prev = e
		}
	}
	// 4,000 and 5,000 of 10,000 expected; 4σ is under 200 for both.
	if moved[1] < 4000-200 || moved[1] > 4000+200 || moved[2] < 5000-200 || moved[2] > 5000+200 {
		t.Errorf("moved %d at 10 → 50 and %d at 50 → 100, want 4,000 and 5,000 ± 200", moved[1], moved[2])
	}
}
