package process

import (
	"reflect"
	"testing"
)

func TestPortCandidates(t *testing.T) {
	for _, c := range []struct {
		lo, hi int
		want   []portRange
	}{
		{32768, 60999, []portRange{{20000, 32000}}},                 // Linux's default
		{49152, 65535, []portRange{{20000, 32000}}},                 // IANA's
		{10000, 65535, []portRange{{1024, 10000}}},                  // wide: below it
		{1024, 65535, nil},                                          // everything is ephemeral
		{25000, 31500, []portRange{{20000, 25000}, {31501, 32000}}}, // inside the dynamic range
		{20500, 31800, []portRange{{1024, 20500}, {31801, 65536}}},  // too little of it left
	} {
		if got := portCandidates(c.lo, c.hi); !reflect.DeepEqual(got, c.want) {
			t.Errorf("portCandidates(%d, %d) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	seen := map[int]bool{}
	for range 1000 {
		p := pickPort([]portRange{{100, 102}, {200, 201}})
		if p != 100 && p != 101 && p != 200 {
			t.Fatalf("pickPort = %d, outside its ranges", p)
		}
		seen[p] = true
	}
	if len(seen) != 3 {
		t.Errorf("pickPort over 1000 picks hit %v, want all three ports", seen)
	}
}
