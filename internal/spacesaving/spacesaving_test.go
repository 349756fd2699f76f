package spacesaving

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestHeapAndIndexStayConsistent: on skewed random streams the summary
// stays a min-heap whose nodes know their places and are indexed by their
// hashes, and its counts sum to the stream's length.
func TestHeapAndIndexStayConsistent(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 1))
		s := New(16)
		zipf := rand.NewZipf(rng, 1.3, 1, 500)
		var total uint64
		for range 5000 {
			n := uint64(1 + rng.IntN(3))
			s.Add(fmt.Appendf(nil, "k%d", zipf.Uint64()), n)
			total += n
		}
		if len(s.heap) != 16 || len(s.idx) != 16 {
			t.Fatalf("seed %d: %d entries, %d indexed, want 16", seed, len(s.heap), len(s.idx))
		}
		var sum uint64
		for i, e := range s.heap {
			sum += e.count
			if s.idx[e.hash] != e || e.pos != i {
				t.Fatalf("seed %d: %q indexed at %d, want %d", seed, e.key, e.pos, i)
			}
			if i > 0 && s.heap[(i-1)/2].count > e.count {
				t.Fatalf("seed %d: heap order broken at %d", seed, i)
			}
		}
		if sum != total {
			t.Errorf("seed %d: counts sum to %d, want %d", seed, sum, total)
		}
		s.Reset()
		if s.Len() != 0 || s.Floor() != 0 {
			t.Errorf("after Reset: %d entries, floor %d", s.Len(), s.Floor())
		}
	}
}
