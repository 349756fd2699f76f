package replay

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/replay/ctgen"
)

// throttles plays calls (instants, in order) through package bucket, one
// Take each: the oracle the searches are checked against.
func throttles(calls []int64, l bucket.Limit) int64 {
	var s bucket.State
	var n int64
	for _, at := range calls {
		st, d := l.TakeAt(s, at, 1)
		if d.Allowed {
			s = st
		} else {
			n++
		}
	}
	return n
}

// callsOf returns the instants of a tenant's calls in a log of spec s.
func callsOf(s ctgen.Spec, tn ctgen.Tenant) []int64 {
	var out []int64
	for sec := range int(s.Duration / time.Second) {
		at := s.Start.Add(time.Duration(sec) * time.Second).UnixNano()
		for range tn.Calls(sec) {
			out = append(out, at)
		}
	}
	return out
}

// slower returns the limit of burst b whose interval is one nanosecond
// longer than that of rate r: a hair below r.
func slower(t *testing.T, b int64, r float64) bucket.Limit {
	t.Helper()
	iv := int64(bucket.MustLimit(b, r).Interval())
	r2, ok := rateOf(b, iv+1)
	l, err := bucket.NewLimit(b, r2)
	if !ok || err != nil || int64(l.Interval()) != iv+1 || r2 >= r {
		t.Fatalf("no rate below %v of interval %d + 1 ns: %v, %v", r, iv, r2, err)
	}
	return l
}

// The acceptance test: on the generated shape (a tenant bursting 300
// DescribeClusters in one second every minute, another steady at 25 a
// second), the throttles are the bucket's own, the recommended limits
// admit every call when replayed as overrides, and each is the smallest:
// a limit one nanosecond of interval slower (or one token smaller)
// throttles, as package bucket itself says.
func TestSmallestLimitsAreExact(t *testing.T) {
	r, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := quota.Default()
	for _, tn := range acceptance.Tenants {
		b := bucketOf(t, r, tn.Account)
		calls := callsOf(acceptance, tn)
		_, conf, err := cfg.Resolve("ecs", tn.Account, "us-east-1", tn.Action)
		if err != nil {
			t.Fatal(err)
		}
		if want := throttles(calls, conf); b.Throttled != want || b.Calls != int64(len(calls)) {
			t.Errorf("%s: %d of %d calls throttled, the bucket says %d of %d", tn.Account, b.Throttled, b.Calls, want, len(calls))
		}
		if b.AdmitBurst == 0 || b.AdmitRate == 0 {
			t.Fatalf("%s: no admitting limit: %+v", tn.Account, b)
		}
		admit := bucket.MustLimit(b.AdmitBurst, b.AdmitRate)
		if n := throttles(calls, admit); n != 0 {
			t.Errorf("%s: %v throttles %d", tn.Account, admit, n)
		}
		if n := throttles(calls, slower(t, b.AdmitBurst, b.AdmitRate)); n == 0 {
			t.Errorf("%s: a hair below %v throttles none: it is not the smallest", tn.Account, admit)
		}
		if n := throttles(calls, bucket.MustLimit(b.AdmitBurst-1, 1e9)); n == 0 && b.AdmitBurst > conf.Capacity() {
			t.Errorf("%s: a burst of %d admits every call at any rate", tn.Account, b.AdmitBurst-1)
		}
		allowed := b.Calls / 1000
		if n := throttles(calls, bucket.MustLimit(b.AdmitBurst, b.Rate999)); n > allowed {
			t.Errorf("%s: 99.9 %% rate %g throttles %d, more than %d", tn.Account, b.Rate999, n, allowed)
		}
		if n := throttles(calls, slower(t, b.AdmitBurst, b.Rate999)); n <= allowed {
			t.Errorf("%s: a hair below the 99.9 %% rate %g throttles %d, within %d", tn.Account, b.Rate999, n, allowed)
		}
		if n := throttles(calls, bucket.MustLimit(b.Burst999, conf.RefillPerSecond())); n > allowed {
			t.Errorf("%s: 99.9 %% burst %d throttles %d", tn.Account, b.Burst999, n)
		}
		if n := throttles(calls, bucket.MustLimit(b.Burst999-1, conf.RefillPerSecond())); n <= allowed {
			t.Errorf("%s: 99.9 %% burst %d less one throttles %d, within %d", tn.Account, b.Burst999, n, allowed)
		}
		if n := throttles(calls, bucket.MustLimit(b.BurstAtRate, conf.RefillPerSecond())); n != 0 {
			t.Errorf("%s: burst at rate %d throttles %d", tn.Account, b.BurstAtRate, n)
		}
	}

	// Replayed again with the overrides pasted in a config, or with the
	// hair-slower limits: none throttled, then some.
	var ov bytes.Buffer
	if err := r.WriteOverrides(&ov); err != nil {
		t.Fatal(err)
	}
	cfg2, err := config.Parse("overrides.yaml", []byte("services:\n  - preset: ecs\n"+ov.String()))
	if err != nil {
		t.Fatalf("the overrides do not parse: %v\n%s", err, ov.String())
	}
	again, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Quota: cfg2.Quota, Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range again.Buckets {
		if b.Throttled != 0 {
			t.Errorf("with the overrides %s: %d throttled, want none\n%s", b.Account, b.Throttled, ov.String())
		}
	}
	hair, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Groups: noRetries(),
		Limits: func(k quota.Key, _ bucket.Limit) bucket.Limit {
			b := bucketOf(t, r, k.Account)
			return slower(t, b.AdmitBurst, b.AdmitRate)
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range hair.Buckets {
		if b.Throttled == 0 {
			t.Errorf("a hair below the recommended limit, %s: none throttled", b.Account)
		}
	}
}

// playSearch plays calls of one bucket (instants in order) as a replay
// does and searches its limits.
func playSearch(t *testing.T, calls []int64, l bucket.Limit) Bucket {
	t.Helper()
	tr, err := newTrace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close()
	st := newKeyStats(bucketKey{}, 0)
	var mins throttledMinutes
	for _, at := range calls {
		st.arrive(at, l, &mins)
		tr.add(0, at, 0, 0)
	}
	st.finish(l, mins)
	ls, _, err := searchLimits(tr, []*keyStats{&st}, func(int32) bucket.Limit { return l })
	if err != nil {
		t.Fatal(err)
	}
	b := Bucket{Calls: st.calls, Burst: l.Capacity(), Rate: l.RefillPerSecond(), BurstAtRate: st.need, PeakInstant: st.peak}
	ls[0].fill(&b)
	return b
}

// On random calls, at nanosecond and second scales, each limit is the
// boundary package bucket gives: it admits (all, or 99.9 %), and one
// nanosecond of interval slower, or one token less, does not.
func TestSmallestLimitsOnRandomCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		unit := int64(1)
		if trial%2 == 1 {
			unit = int64(time.Millisecond)
		}
		n := 1 + rng.IntN(3000)
		calls := make([]int64, n)
		at := int64(1_700_000_000) * int64(time.Second)
		for i := range calls {
			if rng.IntN(4) > 0 {
				at += unit * int64(rng.IntN(200))
			}
			calls[i] = at
		}
		conf := bucket.MustLimit(1+int64(rng.IntN(20)), 1e9/float64(unit)/float64(1+rng.IntN(100)))
		b := playSearch(t, calls, conf)
		allowed := int64(n) / 1000
		if got := throttles(calls, conf); got > 0 && b.AdmitBurst == 0 {
			t.Fatalf("trial %d: no admitting limit for %d calls", trial, n)
		}
		if b.AdmitBurst == 0 {
			continue
		}
		if b.AdmitRate == 0 {
			if int64(n) > b.AdmitBurst {
				t.Errorf("trial %d: any rate, with %d calls over a burst of %d", trial, n, b.AdmitBurst)
			}
			continue
		}
		if got := throttles(calls, bucket.MustLimit(b.AdmitBurst, b.AdmitRate)); got != 0 {
			t.Errorf("trial %d: %d/%g throttles %d", trial, b.AdmitBurst, b.AdmitRate, got)
		}
		if got := throttles(calls, slower(t, b.AdmitBurst, b.AdmitRate)); got == 0 {
			t.Errorf("trial %d: a hair below %d/%g admits all", trial, b.AdmitBurst, b.AdmitRate)
		}
		if b.Rate999 > 0 {
			if got := throttles(calls, bucket.MustLimit(b.AdmitBurst, b.Rate999)); got > allowed {
				t.Errorf("trial %d: 99.9 %% rate %g throttles %d > %d", trial, b.Rate999, got, allowed)
			}
			if got := throttles(calls, slower(t, b.AdmitBurst, b.Rate999)); got <= allowed {
				t.Errorf("trial %d: a hair below the 99.9 %% rate %g throttles %d ≤ %d", trial, b.Rate999, got, allowed)
			}
		}
		if b.Burst999 < 1 {
			t.Errorf("trial %d: no 99.9 %% burst", trial)
			continue
		}
		if got := throttles(calls, bucket.MustLimit(b.Burst999, conf.RefillPerSecond())); got > allowed {
			t.Errorf("trial %d: 99.9 %% burst %d throttles %d > %d", trial, b.Burst999, got, allowed)
		}
		if b.Burst999 > 1 {
			if got := throttles(calls, bucket.MustLimit(b.Burst999-1, conf.RefillPerSecond())); got <= allowed {
				t.Errorf("trial %d: 99.9 %% burst %d less one throttles %d ≤ %d", trial, b.Burst999, got, allowed)
			}
		}
	}
}

// The 99.9 % searches rely on a bucket's throttles never falling as its
// interval grows or its burst shrinks; this checks it on random calls.
func TestThrottlesAreMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		calls := make([]int64, 2+rng.IntN(12))
		var at int64 = 1
		for i := range calls {
			if rng.IntN(3) > 0 {
				at += int64(rng.IntN(20))
			}
			calls[i] = at
		}
		for b := int64(1); b <= 4; b++ {
			prev := int64(-1)
			for iv := int64(1); iv <= 40; iv++ {
				n := throttles(calls, bucket.MustLimit(b, 1e9/float64(iv)))
				if n < prev {
					t.Fatalf("calls %v, burst %d: interval %d ns throttles %d, one less %d", calls, b, iv, n, prev)
				}
				prev = n
			}
		}
	}
}

// rateOf writes an interval's rate as its shortest decimal.
func TestRateOf(t *testing.T) {
	for _, tc := range []struct {
		iv   int64
		want float64
	}{{200_000_000, 5}, {40_066_889, 24.9582642}, {333_333_334, 3}, {1, 1e9}, {3, 333333334}} {
		r, ok := rateOf(50, tc.iv)
		if !ok || r != tc.want || bucket.MustLimit(50, r).Interval() != time.Duration(tc.iv) {
			t.Errorf("rateOf(%d) = %v, %v; want %v", tc.iv, r, ok, tc.want)
		}
	}
	if _, ok := rateOf(50, 0); ok {
		t.Error("rateOf(0): ok")
	}
}

// Without room for the trace of played calls, the replay still reports
// every bucket's throttles, and says the limits were not searched.
func TestNoTraceStillReplays(t *testing.T) {
	r, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Groups: noRetries(), TempDir: t.TempDir() + "/no-such-dir"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], "limits not searched: the trace of played calls: ") {
		t.Errorf("errors %q", r.Errors)
	}
	if b := bucketOf(t, r, "111122223333"); b.Throttled != 2500 || b.AdmitBurst != 0 || b.BurstAtRate != 300 {
		t.Errorf("burst tenant without the search: %+v", b)
	}
	if r.Timeline != nil {
		t.Error("a timeline without the trace")
	}
}
