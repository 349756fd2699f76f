package process

import (
	"net"
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

// TestRunnersNeverShareAPort: a port given to one Runner's instance is
// not given to another Runner's while the first holds it (an instance
// listens only a cold start later, so the port still binds meanwhile).
// Not parallel: it narrows the candidate ports of the whole package.
func TestRunnersNeverShareAPort(t *testing.T) {
	var ranges []portRange
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ranges = append(ranges, portRange{p, p + 1})
	}
	was := candidatePorts
	candidatePorts = func() []portRange { return ranges }
	t.Cleanup(func() { candidatePorts = was })

	a, b := &Runner{}, &Runner{}
	held := map[int]bool{}
	for range len(ranges) {
		p, err := a.freePort()
		if err != nil {
			t.Fatalf("runner a: %v", err)
		}
		held[p] = true
	}
	if len(held) != len(ranges) {
		t.Fatalf("runner a got ports %v, want %d different", held, len(ranges))
	}
	if p, err := b.freePort(); err == nil {
		t.Fatalf("runner b was given port %d, which runner a holds (%v)", p, held)
	}
	for p := range held {
		a.releasePort(p)
	}
	p, err := b.freePort()
	if err != nil {
		t.Fatalf("runner b, once a released its ports: %v", err)
	}
	b.releasePort(p)
}
