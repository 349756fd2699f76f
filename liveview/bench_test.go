package liveview

import (
	"testing"

	"github.com/tollgate/tollgate/quota"
)

// The recorder's own cost per call, to set beside a decision's (see
// gateway's BenchmarkLive for the whole path, side by side).

func BenchmarkCount(b *testing.B) {
	s := New(Options{}).Series("ecs", "cluster-read")
	for i := 0; b.Loop(); i++ {
		s.Count(i%4 != 0)
	}
}

func BenchmarkThrottledOneKey(b *testing.B) {
	r := New(Options{})
	k := acct(7)
	for b.Loop() {
		r.Throttled(k)
	}
}

// BenchmarkThrottledChurn throttles 4,096 keys in turn on a 128-key
// summary: every call evicts, the worst case.
func BenchmarkThrottledChurn(b *testing.B) {
	r := New(Options{})
	ks := make([]quota.Key, 4096)
	for i := range ks {
		ks[i] = acct(i)
	}
	for i := 0; b.Loop(); i++ {
		r.Throttled(ks[i%len(ks)])
	}
}
