package rls

import (
	"context"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestLatencyByMethodAndCode checks that every call lands in the latency
// histogram under its own method and code, those of ShouldRateLimit (whose
// series the server keeps at hand) as well as the others.
func TestLatencyByMethodAndCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := start(t, Options{Config: mustParse(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n"), Registry: reg})
	ctx := context.Background()
	for range 3 {
		ts.call(t, "d", desc("k=v"))
	}
	for range 2 { // an empty domain: UNKNOWN, as envoy ratelimit answers it
		if _, err := ts.client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k=v")}}); err == nil {
			t.Fatal("no domain: no error")
		}
	}
	if _, err := healthpb.NewHealthClient(ts.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	want := map[[2]string]uint64{
		{rlspb.RateLimitService_ShouldRateLimit_FullMethodName, codes.OK.String()}:      3,
		{rlspb.RateLimitService_ShouldRateLimit_FullMethodName, codes.Unknown.String()}: 2,
		{healthpb.Health_Check_FullMethodName, codes.OK.String()}:                       1,
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]uint64{}
	for _, f := range families {
		if f.GetName() != "tollgate_rls_grpc_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var key [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "method":
					key[0] = l.GetValue()
				case "code":
					key[1] = l.GetValue()
				}
			}
			got[key] = m.GetHistogram().GetSampleCount()
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s %s: %d calls, want %d", k[0], k[1], got[k], n)
		}
	}
}
