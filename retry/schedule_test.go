package retry

import (
	"testing"
	"time"
)

func TestExponentialSeedScheduleFixedFraction(t *testing.T) {
	want := []time.Duration{
		1500 * time.Millisecond, 2500 * time.Millisecond, 4500 * time.Millisecond,
		8500 * time.Millisecond, 16500 * time.Millisecond, 32 * time.Second, 32 * time.Second,
	}
	for n, w := range want {
		if got := DefaultSchedule().Delay(n, 0, fixedRand(0.5)); got != w {
			t.Errorf("Delay(%d) = %v, want %v", n, got, w)
		}
	}
}

func TestExponentialSeedScheduleSeeded(t *testing.T) {
	rnd, ref := seeded(), seeded()
	for n := range 12 {
		r := ref.Float64()
		want := min(time.Duration(1<<n)*time.Second+time.Duration(r*float64(time.Second)), 32*time.Second)
		got := DefaultSchedule().Delay(n, 0, rnd)
		if got != want {
			t.Fatalf("Delay(%d) = %v, want %v", n, got, want)
		}
		if n < 5 && (got < time.Duration(1<<n)*time.Second || got >= time.Duration(1<<n+1)*time.Second) {
			t.Fatalf("Delay(%d) = %v outside [2^n, 2^n+1) s", n, got)
		}
	}
}

func TestExponentialHugeRetryNumberSaturates(t *testing.T) {
	e := Exponential{Unit: time.Hour, Max: 64 * time.Second}
	for _, n := range []int{40, 62, 63, 64, 1000, 1 << 30} {
		if got := e.Delay(n, 0, fixedRand(0.99)); got != 64*time.Second {
			t.Errorf("Delay(%d) = %v, want cap", n, got)
		}
	}
	if got := (Exponential{}).Delay(0, 0, fixedRand(0)); got != time.Second {
		t.Errorf("zero Exponential Delay(0) = %v, want 1s", got)
	}
}

func TestFullJitter(t *testing.T) {
	s := FullJitter{Base: 100 * time.Millisecond, Cap: time.Second}
	cases := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{0, 0.5, 50 * time.Millisecond},
		{2, 0.5, 200 * time.Millisecond},
		{4, 0.5, 500 * time.Millisecond},
		{100, 0.25, 250 * time.Millisecond},
		{3, 0, 0},
	}
	for _, c := range cases {
		if got := s.Delay(c.n, 0, fixedRand(c.r)); got != c.want {
			t.Errorf("FullJitter.Delay(%d, r=%v) = %v, want %v", c.n, c.r, got, c.want)
		}
	}
}

func TestEqualJitter(t *testing.T) {
	s := EqualJitter{Base: 100 * time.Millisecond, Cap: time.Second}
	cases := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{0, 0, 50 * time.Millisecond},
		{0, 0.5, 75 * time.Millisecond},
		{3, 0.5, 600 * time.Millisecond},
		{50, 0, 500 * time.Millisecond},
	}
	for _, c := range cases {
		if got := s.Delay(c.n, 0, fixedRand(c.r)); got != c.want {
			t.Errorf("EqualJitter.Delay(%d, r=%v) = %v, want %v", c.n, c.r, got, c.want)
		}
	}
}

func TestDecorrelatedJitter(t *testing.T) {
	s := DecorrelatedJitter{Base: 100 * time.Millisecond, Cap: time.Second}
	// prev = 0 starts from Base: U[100ms, 300ms).
	if got := s.Delay(0, 0, fixedRand(0.5)); got != 200*time.Millisecond {
		t.Errorf("first = %v, want 200ms", got)
	}
	// prev = 200ms: U[100ms, 600ms).
	if got := s.Delay(1, 200*time.Millisecond, fixedRand(0.5)); got != 350*time.Millisecond {
		t.Errorf("second = %v, want 350ms", got)
	}
	if got := s.Delay(2, 900*time.Millisecond, fixedRand(0.9)); got != time.Second {
		t.Errorf("capped = %v, want 1s", got)
	}
	rnd := seeded()
	prev := time.Duration(0)
	for n := range 50 {
		d := s.Delay(n, prev, rnd)
		if d < s.Base || d > s.Cap {
			t.Fatalf("Delay(%d) = %v outside [Base, Cap]", n, d)
		}
		prev = d
	}
}

func TestConstant(t *testing.T) {
	if got := Constant(3*time.Second).Delay(9, time.Hour, fixedRand(0.7)); got != 3*time.Second {
		t.Errorf("Constant = %v", got)
	}
	if got := Constant(-time.Second).Delay(0, 0, fixedRand(0)); got != 0 {
		t.Errorf("negative Constant = %v, want 0", got)
	}
}
