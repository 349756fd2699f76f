package rls

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/limiter/memory"
)

const perMinute = `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: q
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

func TestHitsAddend(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, perMinute)})
	call := func(reqHits uint32, d *ratelimitv3.RateLimitDescriptor) *rlspb.RateLimitResponse_DescriptorStatus {
		t.Helper()
		r, err := ts.client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}, HitsAddend: reqHits})
		if err != nil {
			t.Fatal(err)
		}
		return r.Statuses[0]
	}
	// The request's hits_addend: 0 means 1.
	if st := call(0, desc("k=a")); st.LimitRemaining != 9 {
		t.Errorf("hits_addend 0: remaining %d, want 9", st.LimitRemaining)
	}
	if st := call(4, desc("k=a")); st.LimitRemaining != 5 {
		t.Errorf("hits_addend 4: remaining %d, want 5", st.LimitRemaining)
	}
	// A descriptor's own hits_addend wins, and 0 only looks.
	if st := call(4, withHits(desc("k=a"), 0)); st.Code != codeOK || st.LimitRemaining != 5 {
		t.Errorf("descriptor hits_addend 0: %v, want a look at 5 remaining", st)
	}
	if st := call(1, withHits(desc("k=a"), 2)); st.LimitRemaining != 3 {
		t.Errorf("descriptor hits_addend 2: remaining %d, want 3", st.LimitRemaining)
	}
	// More than held is denied and takes nothing; the bucket still holds
	// 3, but the refusal says 0 remain and to wait until 5 are back
	// (2 more: 12 s at one per 6 s).
	if st := call(5, desc("k=a")); st.Code != codeOver || st.LimitRemaining != 0 || st.DurationUntilReset.AsDuration() != 12*time.Second {
		t.Errorf("hits_addend 5 with 3 held: %v", st)
	}
	if st := call(3, desc("k=a")); st.Code != codeOK || st.LimitRemaining != 0 {
		t.Errorf("hits_addend 3 with 3 held: %v", st)
	}
	// More than the capacity can never be admitted: wait the window.
	if st := call(0, withHits(desc("k=b"), 1<<40)); st.Code != codeOver || st.LimitRemaining != 0 || st.DurationUntilReset.AsDuration() != time.Minute {
		t.Errorf("hits_addend 2^40: %v", st)
	}
	// is_negative_hits is charged like any hit, as envoy ratelimit
	// (which does not read it) charges it.
	d := desc("k=b")
	d.IsNegativeHits = true
	if st := call(3, d); st.Code != codeOK || st.LimitRemaining != 7 {
		t.Errorf("is_negative_hits: %v", st)
	}
}

func TestLimitOverride(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, perMinute), MaxWindow: 52 * 24 * time.Hour})
	over := func(pairs ...string) *ratelimitv3.RateLimitDescriptor {
		d := desc(pairs...)
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_HOUR}
		return d
	}
	for i := range 3 {
		r := ts.call(t, "d", over("k=a"))
		st := r.Statuses[0]
		if st.Code != codeOK || st.LimitRemaining != uint32(2-i) || st.CurrentLimit.GetRequestsPerUnit() != 3 || st.CurrentLimit.GetUnit() != rlspb.RateLimitResponse_RateLimit_HOUR {
			t.Fatalf("override call %d: %v", i+1, st)
		}
	}
	if r := ts.call(t, "d", over("k=a")); r.OverallCode != codeOver {
		t.Errorf("4th under an override of 3/h: %v", r)
	}
	// The override applies to descriptors the config does not know…
	if r := ts.call(t, "d", over("nothing=x")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 3 {
		t.Errorf("override of an unknown descriptor: %v", r)
	}
	// …but not in a domain the config does not know, as in envoy ratelimit.
	if r := ts.call(t, "unknown", over("k=a")); r.Statuses[0].CurrentLimit != nil {
		t.Errorf("override in an unknown domain: %v", r)
	}
	// The override's bucket is the descriptor's: the config's 10/min now
	// sees it empty (3 per hour taken).
	if r := ts.call(t, "d", desc("k=a")); r.Statuses[0].LimitRemaining > 7 {
		t.Errorf("config rule after override: %v", r.Statuses[0])
	}
	// Units the store cannot hold, or none, are refused.
	for _, u := range []typev3.RateLimitUnit{typev3.RateLimitUnit_UNKNOWN, typev3.RateLimitUnit_YEAR, typev3.RateLimitUnit(99)} {
		d := desc("k=a")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: u}
		_, err := ts.client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("override unit %v: %v, want InvalidArgument", u, err)
		}
		if u == typev3.RateLimitUnit_YEAR && !strings.Contains(err.Error(), "3 per 365 days refills over longer than the 52 days the store holds") {
			t.Errorf("override of a year: %v", err)
		}
	}
	// unit_multiplier stretches the window: 2 per 2 seconds.
	d := desc("k=m")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(2)}
	ts.call(t, "d", d)
	ts.call(t, "d", d)
	ts.clock.Advance(999 * time.Millisecond)
	if r := ts.call(t, "d", d); r.OverallCode != codeOver {
		t.Errorf("2 per 2 s refilled within 1 s: %v", r)
	}
	ts.clock.Advance(time.Millisecond)
	if r := ts.call(t, "d", d); r.OverallCode != codeOK {
		t.Errorf("2 per 2 s not refilled after 1 s: %v", r)
	}
}

func TestQuotaMode(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, perMinute)})
	// Both quota descriptors admitted.
	if r := ts.call(t, "d", desc("q=a"), desc("q2=a")); r.OverallCode != codeOK {
		t.Fatalf("first: %v", r)
	}
	// Only one quota descriptor over: still OK overall.
	if r := ts.call(t, "d", desc("q=a"), desc("q2=b")); r.OverallCode != codeOK || r.Statuses[0].Code != codeOver {
		t.Errorf("one of two quota descriptors over: %v", r)
	}
	// All quota descriptors over: OVER_LIMIT.
	if r := ts.call(t, "d", desc("q=a"), desc("q2=a")); r.OverallCode != codeOver {
		t.Errorf("all quota descriptors over: %v", r)
	}
	// A non-quota descriptor over decides alone.
	for range 10 {
		ts.call(t, "d", desc("k=z"))
	}
	if r := ts.call(t, "d", desc("k=z"), desc("q=new")); r.OverallCode != codeOver {
		t.Errorf("rate limit descriptor over with a quota one OK: %v", r)
	}
}

func TestLookupOrder(t *testing.T) {
	cfg := mustParse(t, `
domain: o
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: "ab*"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    value: "a*"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: k
    value: abc
    rate_limit: {unit: second, requests_per_unit: 4}
`)
	for value, want := range map[string]uint32{"abc": 4, "abd": 2, "axe": 3, "zzz": 1, "": 1} {
		m := cfg.Lookup("o", desc("k="+value).Entries)
		if m.Rule == nil || m.Rule.RequestsPerUnit != want {
			t.Errorf("k=%q matched %v, want the rule of %d", value, m.Rule, want)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, perMinute)})
	many := make([]*ratelimitv3.RateLimitDescriptor, MaxDescriptors+1)
	for i := range many {
		many[i] = desc("k=a")
	}
	for _, c := range []struct {
		name string
		req  *rlspb.RateLimitRequest
		code codes.Code
		msg  string
	}{
		// envoy ratelimit's codes: its plain errors reach gRPC as Unknown.
		{"empty domain", &rlspb.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k=a")}}, codes.Unknown, "domain must not be empty"},
		{"no descriptors", &rlspb.RateLimitRequest{Domain: "d"}, codes.Unknown, "descriptor list must not be empty"},
		{"too many", &rlspb.RateLimitRequest{Domain: "d", Descriptors: many}, codes.InvalidArgument, "at most 1024"},
	} {
		_, err := ts.client.ShouldRateLimit(context.Background(), c.req)
		if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), c.msg) {
			t.Errorf("%s: %v, want %v with %q", c.name, err, c.code, c.msg)
		}
	}
	if got := counterValue(t, ts.metrics.invalidRequests); got != 3 {
		t.Errorf("invalid_requests = %v, want 3", got)
	}
	// Nothing was taken by the refused requests.
	if r := ts.call(t, "d", desc("k=a")); r.Statuses[0].LimitRemaining != 9 {
		t.Errorf("after refused requests: %v", r.Statuses[0])
	}
	// A descriptor without entries, or with an entry without a key, is
	// answered OK and the others are decided, as envoy ratelimit does:
	// the over-limit one still makes the request OVER_LIMIT.
	for range 10 {
		ts.call(t, "d", desc("k=b"))
	}
	r, err := ts.client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{}, desc("k=a", "=v"), desc("k=b")}})
	if err != nil || r.OverallCode != codeOver || r.Statuses[0].Code != codeOK || r.Statuses[1].Code != codeOK || r.Statuses[2].Code != codeOver {
		t.Errorf("per-descriptor errors: %v %v", r, err)
	}
	if got := counterValue(t, ts.metrics.invalidDescriptors); got != 2 {
		t.Errorf("invalid_descriptors = %v, want 2", got)
	}
}

// A rule above 10⁹ per second loads (envoy ratelimit accepts it) and
// refills at 10⁹ per second; a one-hour rule whose interval was rounded
// up never reports a reset longer than its hour.
func TestHugeRatesAndResetBound(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `domain: d
descriptors:
  - key: fast
    rate_limit: {unit: second, requests_per_unit: 4000000000}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 4004400000}
`)})
	if st := ts.call(t, "d", withHits(desc("fast=a"), 1000)).Statuses[0]; st.Code != codeOK || st.LimitRemaining != 4_000_000_000-1000 {
		t.Errorf("4e9/s: %v", st)
	}
	st := ts.call(t, "d", withHits(desc("hour=a"), 4_004_400_000)).Statuses[0]
	if got := st.DurationUntilReset.AsDuration(); st.Code != codeOK || got > time.Hour || got < 59*time.Minute {
		t.Errorf("an emptied hourly bucket resets in %v, want at most an hour: %v", got, st)
	}
}

func TestResponseHeaders(t *testing.T) {
	cfg := mustParse(t, `
domain: h
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: u
    rate_limit: {unlimited: true}
`)
	headers := func(r *rlspb.RateLimitResponse) map[string]string {
		m := map[string]string{}
		for _, h := range r.ResponseHeadersToAdd {
			m[h.Key] = h.Value
		}
		return m
	}
	off := start(t, Options{Config: cfg})
	if r := off.call(t, "h", desc("a=1")); len(r.ResponseHeadersToAdd) != 0 {
		t.Errorf("headers without ResponseHeaders: %v", r.ResponseHeadersToAdd)
	}
	ts := start(t, Options{Config: cfg, ResponseHeaders: true})
	// The descriptor closest to its limit is reported: b has 4 of 5 left
	// (refilled within 1 s), a 9 of 10 (6 s).
	r := ts.call(t, "h", desc("a=1"), desc("b=1"), desc("u=1"))
	want := map[string]string{"RateLimit-Limit": "5", "RateLimit-Remaining": "4", "RateLimit-Reset": "1"}
	if got := headers(r); !equalMaps(got, want) {
		t.Errorf("headers %v, want %v", got, want)
	}
	// An over-limit descriptor is reported whatever its remaining, as 0
	// remaining and the seconds until its hits would be admitted: 3 hits
	// with 1 held wait for 2 more tokens, 400 ms, rounded up.
	for range 4 {
		ts.call(t, "h", desc("b=2"))
	}
	r = ts.call(t, "h", withHits(desc("b=2"), 3), desc("a=2"))
	want = map[string]string{"RateLimit-Limit": "5", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"}
	if got := headers(r); r.OverallCode != codeOver || !equalMaps(got, want) {
		t.Errorf("over limit: %v headers %v, want %v", r.OverallCode, got, want)
	}
	// Only unlimited or unmatched descriptors: no headers.
	if r := ts.call(t, "h", desc("u=1"), desc("zz=1")); len(r.ResponseHeadersToAdd) != 0 {
		t.Errorf("headers with no limit: %v", r.ResponseHeadersToAdd)
	}
	// Names can be changed.
	named := start(t, Options{Config: cfg, ResponseHeaders: true, LimitHeader: "X-RateLimit-Limit", RemainingHeader: "X-RateLimit-Remaining", ResetHeader: "X-RateLimit-Reset"})
	r = named.call(t, "h", desc("a=1"))
	want = map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "9", "X-RateLimit-Reset": "6"}
	if got := headers(r); !equalMaps(got, want) {
		t.Errorf("named headers %v, want %v", got, want)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestDurationUntilReset(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, perMinute)})
	st := ts.call(t, "d", desc("k=a")).Statuses[0]
	if got := st.DurationUntilReset.AsDuration(); got != 6*time.Second {
		t.Errorf("after 1 of 10/min: reset in %v, want 6s (one token's refill)", got)
	}
	ts.clock.Advance(2 * time.Second)
	st = ts.call(t, "d", withHits(desc("k=a"), 3)).Statuses[0]
	if got := st.DurationUntilReset.AsDuration(); got != 22*time.Second {
		t.Errorf("after 3 more 2 s later: reset in %v, want 22s", got)
	}
}

func TestGlobalShadowMode(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, perMinute), GlobalShadowMode: true})
	for range 10 {
		ts.call(t, "d", desc("k=a"))
	}
	r := ts.call(t, "d", desc("k=a"))
	if r.OverallCode != codeOK || r.Statuses[0].Code != codeOver {
		t.Errorf("global shadow mode: %v, want overall OK with the descriptor over", r)
	}
	if got := counterValue(t, ts.metrics.globalShadowMode); got != 1 {
		t.Errorf("global_shadow_mode = %v", got)
	}
}

func TestCounters(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, perMinute)})
	// 10/min: near-limit threshold floor(10 × 0.8) = 8.
	for range 7 {
		ts.call(t, "d", desc("k=a"))
	}
	ts.call(t, "d", withHits(desc("k=a"), 2)) // 7 → 9: one hit above 8
	ts.call(t, "d", withHits(desc("k=a"), 3)) // 9 + 3 > 10: 1 near, 2 over
	ts.call(t, "d", desc("k=a"))              // 10th: within, near
	ts.call(t, "d", withHits(desc("k=a"), 4)) // full: 4 over
	c := ts.policy.Load().counters[ts.Config().Rules()[0]]
	for name, want := range map[string]float64{"total_hits": 17, "within_limit": 10, "near_limit": 3, "over_limit": 6} {
		var got float64
		switch name {
		case "total_hits":
			got = counterValue(t, c.totalHits)
		case "within_limit":
			got = counterValue(t, c.withinLimit)
		case "near_limit":
			got = counterValue(t, c.nearLimit)
		case "over_limit":
			got = counterValue(t, c.overLimit)
		}
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	ts.call(t, "nowhere", desc("k=a"), desc("k=b"))
	if got := counterValue(t, ts.metrics.domainNotFound); got != 2 {
		t.Errorf("domain_not_found = %v, want 2", got)
	}
}

func TestReloadKeepsBuckets(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{domain: r, descriptors: [{key: k, rate_limit: {unit: minute, requests_per_unit: 5}}]}`)
	load := func() (*Config, error) { return Load(dir, LoadOptions{}) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ts := start(t, Options{Config: cfg, Reload: load, Registry: reg})
	if got := ts.admitted(t, 3, "r", "k=a"); got != 3 {
		t.Fatal(got)
	}
	// A larger limit keeps the bucket's state, the instant it is full
	// again: 3 taken of 5/min is full in 36 s, which under 10/min is 6
	// tokens missing, 4 held; one more leaves 3.
	write(`{domain: r, descriptors: [{key: k, rate_limit: {unit: minute, requests_per_unit: 10}}]}`)
	if err := ts.Reload(); err != nil {
		t.Fatal(err)
	}
	if r := ts.call(t, "r", desc("k=a")); r.Statuses[0].LimitRemaining != 3 || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 {
		t.Errorf("after reload: %v, want 3 of 10 remaining", r.Statuses[0])
	}
	// A bad file is refused; the old config keeps serving.
	write(`{domain: r, descriptors: [{key: k, rate_limit: {unit: fortnight, requests_per_unit: 10}}]}`)
	err = ts.Reload()
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "config.yaml:1:55: descriptors[0].rate_limit.unit: invalid rate limit unit \"fortnight\"") {
		t.Errorf("bad reload: %v", err)
	}
	if r := ts.call(t, "r", desc("k=a")); r.Statuses[0].LimitRemaining != 2 || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 {
		t.Errorf("after a bad reload: %v", r.Statuses[0])
	}
	if got := counterValue(t, ts.metrics.configLoads.WithLabelValues("error")); got != 1 {
		t.Errorf("config_loads{error} = %v", got)
	}
	if got := counterValue(t, ts.metrics.configLoads.WithLabelValues("ok")); got != 2 {
		t.Errorf("config_loads{ok} = %v", got)
	}
}

func TestHealthAndReflection(t *testing.T) {
	ts := start(t, Options{})
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService", "ratelimit"} {
		r, err := healthpb.NewHealthClient(ts.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v %v", svc, r, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(ts.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range resp.GetListServicesResponse().GetService() {
		found = found || s.Name == "envoy.service.ratelimit.v3.RateLimitService"
	}
	if !found {
		t.Errorf("reflection lists %v", resp.GetListServicesResponse().GetService())
	}
	stream.CloseSend()
	// The empty config answers OK with no limit.
	if r := ts.call(t, "any", desc("k=v")); r.OverallCode != codeOK || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("empty config: %v", r)
	}
}

func TestShadowModeLogs(t *testing.T) {
	var buf logtest.Buffer
	ts := start(t, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil)), Config: mustParse(t, `
domain: s
descriptors:
  - key: k
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`)})
	for range 5 {
		if r := ts.call(t, "s", desc("k=a")); r.OverallCode != codeOK {
			t.Fatalf("shadow mode answered %v", r)
		}
	}
	// Four over-limit decisions, one line: at most one per rule per 10 s.
	if got := strings.Count(buf.String(), "shadow mode: over the limit"); got != 1 {
		t.Errorf("%d shadow-mode log lines, want 1:\n%s", got, buf.String())
	}
	if !strings.Contains(buf.String(), "key=k") || !strings.Contains(buf.String(), "domain=s") {
		t.Errorf("log line lacks the rule: %s", buf.String())
	}
}

// Whatever a client sends, the server answers or refuses it with
// INVALID_ARGUMENT; it never panics.
func FuzzShouldRateLimit(f *testing.F) {
	s := New(Options{Config: mustParse(f, example2, perMinute), Limiter: memory.New(memory.Options{Now: newFakeClock().Now})})
	for _, r := range []*rlspb.RateLimitRequest{
		{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("message_type=marketing", "to_number=1"), desc("to_number=1")}, HitsAddend: 3},
		{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{withHits(desc("k=a"), 1<<62), {Entries: desc("q=1").Entries, Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit_DAY, UnitMultiplier: wrapperspb.UInt32(1 << 31)}}}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rlspb.RateLimitRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		resp, err := s.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.Unknown {
				t.Fatalf("%v for %v", err, &req)
			}
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
	})
}

// A server asked to stop before it began serving (a node that shuts down
// at once) stops cleanly: Run returns nil, not gRPC's ErrServerStopped,
// and closes the listener.
func TestRunStoppedBeforeServing(t *testing.T) {
	for i := range 20 { // the race between Serve and the stop, many times
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := New(Options{Limiter: memory.New(memory.Options{})}).Run(ctx, ln); err != nil {
			t.Fatalf("attempt %d: Run with its context ended: %v, want nil", i, err)
		}
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
			t.Fatalf("attempt %d: the listener still accepts after Run returned", i)
		}
	}
}
