package rls

import (
	"context"
	"strconv"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate/tollgate/limiter/memory"
)

// The decision path without gRPC: lookup, one batch take, the answer.
func BenchmarkShouldRateLimit(b *testing.B) {
	s := New(Options{Config: mustParse(b, example2), Limiter: memory.New(memory.Options{})})
	reqs := make([]*rlspb.RateLimitRequest, 1024)
	for i := range reqs {
		n := strconv.Itoa(i)
		reqs[i] = &rlspb.RateLimitRequest{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			desc("message_type=marketing", "to_number="+n), desc("to_number=" + n),
		}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := s.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// The same through gRPC on loopback, client and server in this process.
func BenchmarkShouldRateLimitGRPC(b *testing.B) {
	ts := start(b, Options{Config: mustParse(b, example2), Limiter: memory.New(memory.Options{})})
	req := &rlspb.RateLimitRequest{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("to_number=1")}}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ts.client.ShouldRateLimit(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
