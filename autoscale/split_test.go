package autoscale

import (
	"errors"
	"testing"
)

// A 90/10 split of 1,000 requests lands exactly 900/100, and every run of
// 100 consecutive requests gives each entry exactly its percent.
func TestSplitExactPerHundred(t *testing.T) {
	for _, percents := range [][]int{{90, 10}, {50, 50}, {1, 99}, {33, 33, 34}, {0, 100}, {10, 0, 90}} {
		s, err := NewSplit(percents)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int, len(percents))
		for n := uint64(1); n <= 1000; n++ {
			got[s.Pick(n)]++
			if n%100 == 0 {
				for i, p := range percents {
					if got[i] != p*int(n)/100 {
						t.Fatalf("%v: after %d requests entry %d has %d, want %d", percents, n, i, got[i], p*int(n)/100)
					}
				}
			}
		}
	}
}

// The 10 % of a 90/10 split is spread out, not a run of 10 in every 100:
// its requests are 8 to 19 apart (slots 90-99 met by n·37 mod 100).
func TestSplitInterleaves(t *testing.T) {
	s, err := NewSplit([]int{90, 10})
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(0)
	for n := uint64(1); n <= 1000; n++ {
		if s.Pick(n) != 1 {
			continue
		}
		if last != 0 && (n-last < 8 || n-last > 19) {
			t.Fatalf("requests %d and %d both to the 10 %%: gap %d", last, n, n-last)
		}
		last = n
	}
}

func TestSplitRefusesBadPercents(t *testing.T) {
	for _, p := range [][]int{nil, {}, {90}, {90, 20}, {-10, 110}, {101}, make([]int, 101)} {
		if _, err := NewSplit(p); !errors.Is(err, ErrInvalidSplit) {
			t.Errorf("NewSplit(%v) = %v, want ErrInvalidSplit", p, err)
		}
	}
}
