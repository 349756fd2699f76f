package rls

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/tollgate/limiter/memory"
)

// fakeClock is a clock tests move by hand; it starts at a fixed instant.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// mustParse parses config files given as YAML texts named a.yaml, b.yaml…
func mustParse(t testing.TB, texts ...string) *Config {
	t.Helper()
	files := make([]File, len(texts))
	for i, s := range texts {
		files[i] = File{Name: string(rune('a'+i)) + ".yaml", Data: []byte(s)}
	}
	cfg, err := Parse(files, LoadOptions{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

// testServer is a Server on a random loopback port with a client to it.
type testServer struct {
	*Server
	client rlspb.RateLimitServiceClient
	conn   *grpc.ClientConn
	clock  *fakeClock
}

// start runs a server with opts (a memory store on a fake clock unless
// opts.Limiter is set) until the test ends.
func start(t testing.TB, opts Options) *testServer {
	t.Helper()
	ts := &testServer{clock: newFakeClock()}
	if opts.Limiter == nil {
		opts.Limiter = memory.New(memory.Options{Now: ts.clock.Now})
	}
	ts.Server = New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.Run(ctx, ln) }()
	ts.conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ts.client = rlspb.NewRateLimitServiceClient(ts.conn)
	t.Cleanup(func() {
		ts.conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ts
}

// desc builds a descriptor from "key=value" pairs ("key=" for an empty
// value).
func desc(pairs ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

// withHits sets a descriptor's own hits_addend.
func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func (ts *testServer) call(t testing.TB, domain string, descs ...*ratelimitv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
	t.Helper()
	resp, err := ts.client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: domain, Descriptors: descs})
	if err != nil {
		t.Fatalf("ShouldRateLimit(%s): %v", domain, err)
	}
	if len(resp.Statuses) != len(descs) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(descs))
	}
	return resp
}

// admitted makes n calls of one descriptor and counts the OK answers.
func (ts *testServer) admitted(t testing.TB, n int, domain string, pairs ...string) int {
	t.Helper()
	ok := 0
	for range n {
		if ts.call(t, domain, desc(pairs...)).OverallCode == rlspb.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}

const (
	codeOK   = rlspb.RateLimitResponse_OK
	codeOver = rlspb.RateLimitResponse_OVER_LIMIT
)

// counterValue reads a counter.
func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
