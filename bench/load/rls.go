package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// rlsClients are the gRPC clients of -mode rls, one per connection;
// worker w uses rlsClients[w % len].
var rlsClients []rlspb.RateLimitServiceClient

// dialRLS opens n connections to an Envoy rate limit service at addr.
func dialRLS(addr string, n int) (func(), error) {
	if addr == "" {
		return nil, errors.New("-mode rls needs -grpc ADDR (or -spawn)")
	}
	var conns []*grpc.ClientConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for range max(n, 1) {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeAll()
			return nil, err
		}
		conns = append(conns, c)
		rlsClients = append(rlsClients, rlspb.NewRateLimitServiceClient(c))
	}
	return closeAll, nil
}

// rlsWorker sends ShouldRateLimit calls of o.batch descriptors each
// ({account: random of o.keys}, domain "load": bench/rls/load.yaml) until
// ctx ends.
func rlsWorker(ctx context.Context, client rlspb.RateLimitServiceClient, o options, id int, interval time.Duration) result {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	var r result
	r.latencies = make([]time.Duration, 0, 1<<16)
	next := time.Now()
	req := &rlspb.RateLimitRequest{Domain: "load", Descriptors: make([]*ratelimitv3.RateLimitDescriptor, o.batch)}
	for i := range req.Descriptors {
		req.Descriptors[i] = &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "account"}}}
	}
	for ctx.Err() == nil {
		if interval > 0 {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return r
				}
			}
		}
		for _, d := range req.Descriptors {
			d.Entries[0].Value = strconv.Itoa(rng.IntN(o.keys))
		}
		t0 := time.Now()
		if interval > 0 {
			t0 = next // no coordinated omission, as in worker
		}
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			if runEnded(ctx, err) {
				break
			}
			r.errs++
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("ShouldRateLimit: %w", err)
			}
			continue
		}
		lat := time.Since(t0)
		for _, st := range resp.GetStatuses() {
			if st.GetCode() == rlspb.RateLimitResponse_OVER_LIMIT {
				r.throttled++
			} else {
				r.allowed++
			}
		}
		r.ok++
		r.latencies = append(r.latencies, lat)
	}
	return r
}

// runEnded reports whether a gRPC call failed because the run ended: gRPC
// times a call out by ctx's deadline on its own timer, which may fire just
// before ctx reports it.
func runEnded(ctx context.Context, err error) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && status.Code(err) == codes.DeadlineExceeded && time.Until(dl) < 10*time.Millisecond
}
