package liveview

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPeakTableIsAnExactTopK checks the table against every key's true
// peak: a key that peaked above the table's floor is in it with that
// peak, and the table never holds more than its cap.
func TestPeakTableIsAnExactTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := newPeakTable(16)
	truth := map[string]uint64{}
	for range 20_000 {
		key := fmt.Sprint("acct-", rng.IntN(500))
		used := rng.Int64N(1000)
		p.add([]byte(key), used, 1000)
		truth[key] = max(truth[key], useOf(used, 1000))
	}
	got := map[string]uint64{}
	for _, e := range p.entries() {
		got[e.rec] = e.score
	}
	if len(got) > 16 {
		t.Fatalf("table holds %d keys, cap 16", len(got))
	}
	floor := p.floor()
	lowest := ^uint64(0)
	for _, score := range got {
		lowest = min(lowest, score)
	}
	if len(got) != 16 || floor != lowest {
		t.Fatalf("a full table of %d keys has floor %d, its lowest peak is %d", len(got), floor, lowest)
	}
	for key, peak := range truth {
		if peak > floor && got[key] != peak {
			t.Errorf("%s peaked at %d above the floor %d; the table says %d", key, peak, floor, got[key])
		}
	}
	for key, score := range got {
		if score != truth[key] {
			t.Errorf("%s: table %d, true peak %d", key, score, truth[key])
		}
	}
}
