package main

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// rateLimitResp encodes one GetRateLimitsResp.responses entry.
func rateLimitResp(status uint64, errMsg string) []byte {
	var m []byte
	if status != 0 {
		m = protowire.AppendTag(m, 1, protowire.VarintType)
		m = protowire.AppendVarint(m, status)
	}
	m = protowire.AppendTag(m, 2, protowire.VarintType) // limit
	m = protowire.AppendVarint(m, 50)
	m = protowire.AppendTag(m, 4, protowire.VarintType) // reset_time
	m = protowire.AppendVarint(m, 1764550000000)
	if errMsg != "" {
		m = protowire.AppendTag(m, 5, protowire.BytesType)
		m = protowire.AppendString(m, errMsg)
	}
	m = protowire.AppendTag(m, 6, protowire.BytesType) // metadata: skipped
	m = protowire.AppendBytes(m, []byte{0x0a, 0x01, 'k', 0x12, 0x01, 'v'})
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func TestCountGubernatorResp(t *testing.T) {
	var body []byte
	body = append(body, rateLimitResp(0, "")...) // UNDER_LIMIT, the zero value, absent
	body = append(body, rateLimitResp(1, "")...) // OVER_LIMIT
	body = append(body, rateLimitResp(0, "")...)
	var r result
	if err := countGubernatorResp(body, &r); err != nil || r.allowed != 2 || r.throttled != 1 {
		t.Fatalf("allowed %d throttled %d, %v", r.allowed, r.throttled, err)
	}
	if err := countGubernatorResp(rateLimitResp(0, "no peer"), &r); err == nil || err.Error() != "rate limit error: no peer" {
		t.Errorf("error field: %v", err)
	}
	if err := countGubernatorResp(body[:len(body)-3], &r); err == nil {
		t.Error("a truncated answer reads without error")
	}
}

func TestAppendRateLimitReq(t *testing.T) {
	b := appendRateLimitReq(nil, 42)
	num, typ, n := protowire.ConsumeTag(b)
	if num != 1 || typ != protowire.BytesType || n < 0 {
		t.Fatalf("outer tag %d/%d", num, typ)
	}
	m, k := protowire.ConsumeBytes(b[n:])
	if k < 0 || n+k != len(b) {
		t.Fatalf("outer length: %d of %d", n+k, len(b))
	}
	got := map[protowire.Number]any{}
	for len(m) > 0 {
		num, typ, n := protowire.ConsumeTag(m)
		m = m[n:]
		switch typ {
		case protowire.BytesType:
			s, k := protowire.ConsumeString(m)
			got[num], m = s, m[k:]
		case protowire.VarintType:
			v, k := protowire.ConsumeVarint(m)
			got[num], m = v, m[k:]
		default:
			t.Fatalf("field %d has wire type %d", num, typ)
		}
	}
	want := map[protowire.Number]any{1: "load", 2: "account:42", 3: uint64(1), 4: uint64(50), 5: uint64(1000)}
	if len(got) != len(want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("field %d = %v, want %v", k, got[k], v)
		}
	}
}

// The answer reader never panics and never loops on any input.
func FuzzCountGubernatorResp(f *testing.F) {
	f.Add(rateLimitResp(1, "x"))
	f.Add(append(rateLimitResp(0, ""), 0x08, 0x01))
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r result
		countGubernatorResp(b, &r)
	})
}

func TestCountGubernatorJSON(t *testing.T) {
	var r result
	body := `{"responses":[{"status":"UNDER_LIMIT","limit":"50","remaining":"49","error":""},{"status":"OVER_LIMIT","error":""},{"limit":"50"}]}`
	if err := countGubernatorJSON([]byte(body), &r); err != nil || r.allowed != 2 || r.throttled != 1 {
		t.Fatalf("allowed %d throttled %d, %v", r.allowed, r.throttled, err)
	}
	if err := countGubernatorJSON([]byte(`{"responses":[{"error":"no peer"}]}`), &r); err == nil || err.Error() != "rate limit error: no peer" {
		t.Errorf("error field: %v", err)
	}
	for _, bad := range []string{`{"responses":[]}`, `{"responses":[{"status":"WHAT"}]}`, `{"resp`} {
		if err := countGubernatorJSON([]byte(bad), &r); err == nil {
			t.Errorf("%s reads without error", bad)
		}
	}
}
