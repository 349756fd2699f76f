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

// throttle calls Throttled for ks in turn, folding every 256 calls with
// the timer stopped when fold is false (the decision path's cost alone), or
// running (the whole cost, decision path and fold, in one goroutine).
func throttle(b *testing.B, ks []quota.Key, timeFold bool) {
	r := New(Options{})
	for i := 0; b.Loop(); i++ {
		r.Throttled(ks[i%len(ks)])
		if i%256 == 255 {
			if !timeFold {
				b.StopTimer()
			}
			r.foldMu.Lock()
			r.fold()
			r.foldMu.Unlock()
			if !timeFold {
				b.StartTimer()
			}
		}
	}
	if d := r.Dropped(); d != 0 {
		b.Fatalf("%d dropped", d)
	}
}

// BenchmarkThrottledOneKey is the decision path's cost of a throttle: a
// copy of the key into a buffer.
func BenchmarkThrottledOneKey(b *testing.B) { throttle(b, keys(1), false) }

// BenchmarkThrottledChurn is BenchmarkThrottledOneKey with 4,096 keys in
// turn.
func BenchmarkThrottledChurn(b *testing.B) { throttle(b, keys(4096), false) }

// BenchmarkFoldOneKey is the whole cost of a throttle, buffer and fold in
// one goroutine: what Run spends per throttle, off the decision path, plus
// the decision path's share.
func BenchmarkFoldOneKey(b *testing.B) { throttle(b, keys(1), true) }

// BenchmarkFoldChurn is BenchmarkFoldOneKey with 4,096 keys in turn on a
// 128-key summary: an eviction per throttle, the worst case.
func BenchmarkFoldChurn(b *testing.B) { throttle(b, keys(4096), true) }

func keys(n int) []quota.Key {
	ks := make([]quota.Key, n)
	for i := range ks {
		ks[i] = acct(i + 7)
	}
	return ks
}
