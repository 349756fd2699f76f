package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

// The baseline is golang.org/x/time/rate the way users run it per key: one
// rate.Limiter per key in a map behind a mutex.
type xrateStore struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (s *xrateStore) allow(key string) bool {
	s.mu.Lock()
	l, ok := s.m[key]
	if !ok {
		l = rate.NewLimiter(20, 50)
		s.m[key] = l
	}
	s.mu.Unlock()
	return l.Allow()
}

var benchLimit = bucket.MustLimit(50, 20)

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("{ecs/%012d}:us-east-1:cluster-read", i)
	}
	return ks
}

func BenchmarkSingleKey(b *testing.B) {
	key := keys(1)[0]
	b.Run("impl=tollgate", func(b *testing.B) {
		s := New(Options{})
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			s.Take(ctx, key, benchLimit, 1)
		}
	})
	b.Run("impl=xrate", func(b *testing.B) {
		s := &xrateStore{m: map[string]*rate.Limiter{}}
		b.ReportAllocs()
		for b.Loop() {
			s.allow(key)
		}
	})
}

// BenchmarkParallel100kKeys spreads takes over 100,000 keys from every
// goroutine at once.
func BenchmarkParallel100kKeys(b *testing.B) {
	ks := keys(100_000)
	b.Run("impl=tollgate", func(b *testing.B) {
		s := New(Options{})
		ctx := context.Background()
		for _, k := range ks {
			s.Take(ctx, k, benchLimit, 1)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for pb.Next() {
				s.Take(ctx, ks[r.IntN(len(ks))], benchLimit, 1)
			}
		})
	})
	b.Run("impl=xrate", func(b *testing.B) {
		s := &xrateStore{m: map[string]*rate.Limiter{}}
		for _, k := range ks {
			s.allow(k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for pb.Next() {
				s.allow(ks[r.IntN(len(ks))])
			}
		})
	})
}

// Benchmark1MKeys takes once from each of 1,000,000 keys in turn, and
// reports the heap the store retains per tracked key beyond the key's own
// bytes (which both stores share with the caller's slice).
func Benchmark1MKeys(b *testing.B) {
	ks := keys(1_000_000)
	b.Run("impl=tollgate", func(b *testing.B) {
		ctx := context.Background()
		// Retention is measured on a frozen clock so every bucket stays in
		// debt and tracked; the timed loop below runs on the real clock.
		frozen := time.Now()
		before := heap()
		held := New(Options{Now: func() time.Time { return frozen }})
		for _, k := range ks {
			held.Take(ctx, k, benchLimit, 1)
		}
		if held.Len() != len(ks) {
			b.Fatalf("tracked %d of %d keys", held.Len(), len(ks))
		}
		perKey := float64(heap()-before) / float64(len(ks))
		runtime.KeepAlive(held)
		held = nil
		s := New(Options{})
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			s.Take(ctx, ks[i], benchLimit, 1)
			if i++; i == len(ks) {
				i = 0
			}
		}
		b.StopTimer()
		b.ReportMetric(perKey, "B/key")
		runtime.KeepAlive(s)
	})
	b.Run("impl=xrate", func(b *testing.B) {
		before := heap()
		s := &xrateStore{m: map[string]*rate.Limiter{}}
		for _, k := range ks {
			s.allow(k)
		}
		perKey := float64(heap()-before) / float64(len(ks))
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			s.allow(ks[i])
			if i++; i == len(ks) {
				i = 0
			}
		}
		b.StopTimer()
		b.ReportMetric(perKey, "B/key")
		runtime.KeepAlive(s)
	})
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkTakeBatch100 is the store's share of the gateway's batch row
// (gateway's BenchmarkBatch100): batches of 100 takes on distinct keys,
// cycling 10,000 keys, the clock moving on 1 ms per batch so every bucket
// has refilled when its key comes round. ns/op is per batch.
func BenchmarkTakeBatch100(b *testing.B) {
	ks := keys(10_000)
	var now time.Time
	s := New(Options{Now: func() time.Time { return now }})
	now = time.Unix(1_000_000, 0)
	reqs := make([]limiter.Request, len(ks))
	for i, k := range ks {
		reqs[i] = limiter.Request{Key: k, Limit: benchLimit, Tokens: 1}
	}
	out := make([]bucket.Decision, 100)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		j := i % 100 * 100
		if err := s.TakeBatch(ctx, reqs[j:j+100], out); err != nil {
			b.Fatal(err)
		}
		now = now.Add(time.Millisecond)
		i++
	}
}
