package rls

import (
	"math"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// The configurations of envoy ratelimit's README ("Examples" 1 to 11),
// verbatim, with the answers it says they give. The clock is frozen, so
// no bucket refills during a test unless the test moves the clock.

func TestReadmeExample1(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`)})
	if got := ts.admitted(t, 501, "mongo_cps", "database=users"); got != 500 {
		t.Errorf("database=users: %d of 501 admitted, want 500", got)
	}
	// Its own bucket: untouched by the users' traffic.
	r := ts.call(t, "mongo_cps", desc("database=default"))
	if r.OverallCode != codeOK || r.Statuses[0].LimitRemaining != 499 || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 500 ||
		r.Statuses[0].CurrentLimit.GetUnit() != rlspb.RateLimitResponse_RateLimit_SECOND {
		t.Errorf("database=default: %v", r)
	}
	// No rule: OK with no limit.
	r = ts.call(t, "mongo_cps", desc("database=other"))
	if r.OverallCode != codeOK || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("database=other: %v", r)
	}
	// The bucket refills at 500/s: 2 ms later one more is admitted.
	ts.clock.Advance(2 * time.Millisecond)
	if got := ts.admitted(t, 2, "mongo_cps", "database=users"); got != 1 {
		t.Errorf("after 2ms: %d of 2 admitted, want 1", got)
	}
}

const example2 = `
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`

func TestReadmeExample2(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, example2)})
	marketing := func(n string) *rlspb.RateLimitResponse {
		return ts.call(t, "messaging", desc("message_type=marketing", "to_number="+n), desc("to_number="+n))
	}
	for i := range 5 {
		r := marketing("2061111111")
		if r.OverallCode != codeOK || r.Statuses[0].LimitRemaining != uint32(4-i) || r.Statuses[1].LimitRemaining != uint32(99-i) {
			t.Fatalf("call %d: %v", i+1, r)
		}
	}
	r := marketing("2061111111")
	if r.OverallCode != codeOver || r.Statuses[0].Code != codeOver || r.Statuses[1].Code != codeOK || r.Statuses[1].LimitRemaining != 94 {
		t.Errorf("6th marketing message: %v", r)
	}
	// Each number has its own buckets (a key without a value).
	if r := marketing("2062222222"); r.OverallCode != codeOK || r.Statuses[0].LimitRemaining != 4 {
		t.Errorf("another number: %v", r)
	}
	// Another message type matches no rule at the first level.
	r = ts.call(t, "messaging", desc("message_type=transactional", "to_number=2061111111"))
	if r.OverallCode != codeOK || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("transactional: %v", r)
	}
	// The day limit: 100 per number.
	if got := ts.admitted(t, 100, "messaging", "to_number=2063333333"); got != 100 {
		t.Errorf("%d of 100 admitted", got)
	}
	if r := ts.call(t, "messaging", desc("to_number=2063333333")); r.OverallCode != codeOver {
		t.Errorf("101st: %v", r)
	}
}

func TestReadmeExample3(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`)})
	if got := ts.admitted(t, 11, "edge_proxy_per_ip", "remote_address=50.0.0.1"); got != 10 {
		t.Errorf("50.0.0.1: %d of 11 admitted, want 10", got)
	}
	r := ts.call(t, "edge_proxy_per_ip", desc("remote_address=50.0.0.5"))
	if r.OverallCode != codeOver || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 0 || r.Statuses[0].LimitRemaining != 0 {
		t.Errorf("black-listed 50.0.0.5: %v", r)
	}
	// A look (hits_addend 0) at a 0 limit is not over it.
	if r := ts.call(t, "edge_proxy_per_ip", withHits(desc("remote_address=50.0.0.5"), 0)); r.OverallCode != codeOK {
		t.Errorf("look at 50.0.0.5: %v", r)
	}
}

func TestReadmeExample4(t *testing.T) {
	flat := start(t, Options{Config: mustParse(t, `
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
`)})
	if r := flat.call(t, "example4", desc("key=value", "subkey=subvalue")); r.Statuses[0].CurrentLimit != nil {
		t.Errorf("two entries against a one-level rule matched: %v", r)
	}
	if r := flat.call(t, "example4", desc("key=value")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 300 {
		t.Errorf("one entry against a one-level rule: %v", r)
	}
	nested := start(t, Options{Config: mustParse(t, `
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
`)})
	if r := nested.call(t, "example4", desc("key=value", "subkey=subvalue")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 300 || r.Statuses[0].LimitRemaining != 299 {
		t.Errorf("two entries against a two-level rule: %v", r)
	}
	if r := nested.call(t, "example4", desc("key=value")); r.Statuses[0].CurrentLimit != nil {
		t.Errorf("one entry against a two-level rule matched: %v", r)
	}
}

func TestReadmeExample5(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`)})
	for range 3 {
		r := ts.call(t, "internal", desc("ldap=x"))
		if st := r.Statuses[0]; r.OverallCode != codeOK || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
			t.Fatalf("ldap: %v", r)
		}
	}
	if got := ts.admitted(t, 101, "internal", "azure=x"); got != 100 {
		t.Errorf("azure: %d of 101 admitted, want 100", got)
	}
}

func TestReadmeExample6(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
`)})
	if got := ts.admitted(t, 15, "example6", "service=auth-service", "user=user-a"); got != 15 {
		t.Errorf("shadow-mode user-a: %d of 15 admitted, want all", got)
	}
	if got := ts.admitted(t, 21, "example6", "service=auth-service", "user=user-b"); got != 20 {
		t.Errorf("user-b: %d of 21 admitted, want 20", got)
	}
	// Shadow mode decides and counts: 5 hits over the limit of 10.
	p := ts.policy.Load()
	var rule *Rule
	for _, r := range p.cfg.Rules() {
		if r.ShadowMode {
			rule = r
		}
	}
	c := p.counters[rule]
	if got := counterValue(t, c.shadowMode); got != 5 {
		t.Errorf("shadow_mode = %v, want 5", got)
	}
	if got := counterValue(t, c.overLimit); got != 5 {
		t.Errorf("over_limit = %v, want 5", got)
	}
	if got := counterValue(t, c.withinLimit); got != 10 {
		t.Errorf("within_limit = %v, want 10", got)
	}
}

func TestReadmeExample7(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`)})
	one, two := func() []string { return []string{"key_1=value_1", "user=bkthomps"} }, func() []string { return []string{"key_2=value_2", "user=bkthomps"} }
	// Both match: only the replacing 10/s applies, and the 5/s bucket is
	// not touched.
	for i := range 10 {
		r := ts.call(t, "example7", desc(one()...), desc(two()...))
		if r.OverallCode != codeOK || r.Statuses[0].CurrentLimit != nil || r.Statuses[1].LimitRemaining != uint32(9-i) {
			t.Fatalf("call %d with both: %v", i+1, r)
		}
	}
	if r := ts.call(t, "example7", desc(one()...), desc(two()...)); r.OverallCode != codeOver {
		t.Errorf("11th with both: %v", r)
	}
	if got := ts.admitted(t, 6, "example7", one()...); got != 5 {
		t.Errorf("(key_1, user) alone: %d of 6 admitted, want 5 (its bucket untouched by the replaced calls)", got)
	}
}

func TestReadmeExample8(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`)})
	for _, c := range []struct {
		value string
		want  int
	}{{"unspecified_value", 10}, {"unspecified_value2", 10}, {"value1", 20}} {
		if got := ts.admitted(t, 25, "example8", "key1="+c.value); got != c.want {
			t.Errorf("key1=%s: %d of 25 admitted, want %d", c.value, got, c.want)
		}
	}
}

func TestReadmeExample9(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
`, `
domain: example9b
descriptors:
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
`, `
domain: example9c
descriptors:
  - key: route
    value: /api/*/resource/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
`)})
	for _, c := range []struct {
		domain, pair string
		match        bool
	}{
		{"example9", "key1=value1", true},
		{"example9", "key1=valueXYZ", true},
		{"example9", "key1=value", true},
		{"example9", "key1=valu", false},
		{"example9b", "path=/api/123/action", true},
		{"example9b", "path=/api/user-id/action", true},
		{"example9b", "path=/api/123/other", false},
		{"example9c", "route=/api/v1/resource/123/action", true},
		{"example9c", "route=/api/v2/resource/456/action", true},
		{"example9c", "route=/api/v2/resource/456", false},
	} {
		r := ts.call(t, c.domain, desc(c.pair))
		if got := r.Statuses[0].CurrentLimit != nil; got != c.match {
			t.Errorf("%s %s: matched %v, want %v", c.domain, c.pair, got, c.match)
		}
	}
	// Without share_threshold every matching value has its own bucket.
	if got := ts.admitted(t, 21, "example9", "key1=valueA"); got != 20 {
		t.Errorf("valueA: %d of 21", got)
	}
	if got := ts.admitted(t, 1, "example9", "key1=valueB"); got != 1 {
		t.Errorf("valueB shares valueA's bucket")
	}
}

func TestReadmeExample10(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
`, `
domain: example10_wildcard
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit:
              unit: minute
              requests_per_unit: 100
`)})
	if got := ts.admitted(t, 61, "example10", "route=api", "http_method=GET", "subject_id=123"); got != 60 {
		t.Errorf("example10: %d of 61, want 60", got)
	}
	if got := ts.admitted(t, 1, "example10", "route=web", "http_method=POST", "subject_id=456"); got != 1 {
		t.Errorf("example10 other values share a bucket")
	}
	r := ts.call(t, "example10_wildcard", desc("user=alice", "action=readfile", "resource=documents"))
	if r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 100 {
		t.Errorf("example10_wildcard: %v", r)
	}
	if r := ts.call(t, "example10_wildcard", desc("user=alice", "action=write", "resource=documents")); r.Statuses[0].CurrentLimit != nil {
		t.Errorf("action=write matched read*: %v", r)
	}
	// Metrics stay one series per rule, whatever the values.
	p := ts.policy.Load()
	if got := counterValue(t, p.counters[p.cfg.Rules()[0]].totalHits); got != 62 {
		t.Errorf("example10 total_hits = %v, want 62", got)
	}
}

func TestReadmeExample11(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `
domain: example11
descriptors:
  # With share_threshold: true, all files/* matches share the same threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  # Without share_threshold, each files_no_share/* match has its own isolated threshold
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
`, `
domain: example11_metrics
descriptors:
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit:
          unit: minute
          requests_per_unit: 60
`)})
	if got := ts.admitted(t, 5, "example11", "files=files/a.pdf"); got != 5 {
		t.Fatalf("a.pdf: %d of 5", got)
	}
	if got := ts.admitted(t, 5, "example11", "files=files/b.csv"); got != 5 {
		t.Fatalf("b.csv: %d of 5", got)
	}
	if r := ts.call(t, "example11", desc("files=files/c.txt")); r.OverallCode != codeOver {
		t.Errorf("c.txt after 10 shared hits: %v", r)
	}
	if got := ts.admitted(t, 11, "example11", "files_no_share=files_no_share/a.pdf"); got != 10 {
		t.Errorf("no_share a.pdf: %d of 11, want 10", got)
	}
	if got := ts.admitted(t, 10, "example11", "files_no_share=files_no_share/b.csv"); got != 10 {
		t.Errorf("no_share b.csv: %d of 10, want 10 (own bucket)", got)
	}
	// Shared at the first level, one bucket per method below it.
	if got := ts.admitted(t, 30, "example11_metrics", "route=api/v1", "method=GET"); got != 30 {
		t.Fatalf("api/v1 GET: %d of 30", got)
	}
	if got := ts.admitted(t, 31, "example11_metrics", "route=api/v2", "method=GET"); got != 30 {
		t.Errorf("api/v2 GET after 30 api/v1 GETs: %d of 31, want 30 (shared with api/v1)", got)
	}
	if got := ts.admitted(t, 1, "example11_metrics", "route=api/v2", "method=POST"); got != 1 {
		t.Errorf("api/v2 POST: own bucket expected")
	}
}
