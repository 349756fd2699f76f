package retry

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"0", 0, false},
		{"120", 2 * time.Minute, false},
		{" 7 ", 7 * time.Second, false},
		{"Sun, 29 Nov 2026 12:00:30 GMT", 30 * time.Second, false},
		{"Sunday, 29-Nov-26 12:01:00 GMT", time.Minute, false},
		{"Sun Nov 29 12:00:05 2026", 5 * time.Second, false},
		{"Sun, 29 Nov 2026 11:00:00 GMT", 0, false},
		{"99999999999999999999", time.Duration(math.MaxInt64), false},
		{"9223372036", 9223372036 * time.Second, false},
		{"9223372037", time.Duration(math.MaxInt64), false},
		{"", 0, true},
		{"-5", 0, true},
		{"1.5", 0, true},
		{"soon", 0, true},
		{"+5", 0, true},
	}
	for _, c := range cases {
		got, err := ParseRetryAfter(c.in, now)
		if c.bad {
			if !errors.Is(err, ErrBadRetryAfter) {
				t.Errorf("ParseRetryAfter(%q) err = %v, want ErrBadRetryAfter", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseAmzRetryAfter(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0": 0, "1500": 1500 * time.Millisecond, "99999999999999999999": time.Duration(math.MaxInt64),
	} {
		if got, err := ParseAmzRetryAfter(in); err != nil || got != want {
			t.Errorf("ParseAmzRetryAfter(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1s", "1.5", "Sun, 29 Nov 2026 12:00:30 GMT"} {
		if _, err := ParseAmzRetryAfter(in); !errors.Is(err, ErrBadRetryAfter) {
			t.Errorf("ParseAmzRetryAfter(%q) err = %v", in, err)
		}
	}
}

func TestHeaderHint(t *testing.T) {
	now := time.Now()
	if _, ok := HeaderHint(http.Header{}, now); ok {
		t.Fatal("hint from empty header")
	}
	if _, ok := HeaderHint(http.Header{"Retry-After": {"later"}}, now); ok {
		t.Fatal("hint from malformed header")
	}
	h := http.Header{"Retry-After": {"2"}, "X-Amz-Retry-After": {"3500"}}
	if d, ok := HeaderHint(h, now); !ok || d != 3500*time.Millisecond {
		t.Fatalf("HeaderHint = %v, %v; want the larger, 3.5s", d, ok)
	}
	if d, ok := HeaderHint(http.Header{"Retry-After": {"4"}, "X-Amz-Retry-After": {"x"}}, now); !ok || d != 4*time.Second {
		t.Fatalf("HeaderHint = %v, %v", d, ok)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "-1", "", "Sun, 29 Nov 2026 12:00:30 GMT",
		"Sunday, 29-Nov-26 12:01:00 GMT", "Sun Nov 29 12:00:05 2026", "99999999999999999999", "1e3", " 5"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseRetryAfter(s, now)
		if err != nil {
			if !errors.Is(err, ErrBadRetryAfter) || d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v", s, d, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", s, d)
		}
		if n, perr := strconv.ParseInt(s, 10, 64); perr == nil && n >= 0 && n < 1<<20 && d != time.Duration(n)*time.Second {
			t.Fatalf("ParseRetryAfter(%q) = %v, want %d s", s, d, n)
		}
		if a, aerr := ParseAmzRetryAfter(s); aerr == nil && a < 0 {
			t.Fatalf("ParseAmzRetryAfter(%q) = %v, negative", s, a)
		}
		_, _ = HeaderHint(http.Header{"Retry-After": {s}, "X-Amz-Retry-After": {s}}, now)
	})
}
