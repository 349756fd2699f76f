package gateway

import (
	"fmt"
	"testing"
	"time"
)

// TestInFlightShares: an address holds at most its share; unproven
// holders together at most the bound less the reserve; a proven key finds
// the reserve; releases give everything back.
func TestInFlightShares(t *testing.T) {
	f := newInFlight(1<<20, 64<<10) // share 128 KiB, reserve 256 KiB
	if f.share != 128<<10 || f.reserve != 256<<10 {
		t.Fatalf("share %d reserve %d, want 128 KiB and 256 KiB", f.share, f.reserve)
	}
	one := holderOf("192.0.2.1:1000", "AKIDX", false)
	if one != holderOf("192.0.2.1:2000", "AKIDY", false) {
		t.Error("two ports of one address, unproven, are two holders")
	}
	held := int64(0)
	for f.acquire(one, 4<<10) {
		held += 4 << 10
	}
	if held != 128<<10 {
		t.Errorf("one address took %d bytes, want its share of 128 KiB", held)
	}
	// A crowd of addresses fills what unproven clients may use.
	crowd := held
	for i := 0; ; i++ {
		h := holderOf(fmt.Sprintf("198.51.100.%d:1", i), "", false)
		if !f.acquire(h, 64<<10) {
			break
		}
		crowd += 64 << 10
	}
	if crowd > 768<<10 || crowd < 700<<10 {
		t.Errorf("unproven clients hold %d bytes, want up to 768 KiB (the bound less the reserve)", crowd)
	}
	tenant := holderOf("192.0.2.1:3000", "AKIDTENANT", true)
	if !f.acquire(tenant, 64<<10) {
		t.Error("a proven key found no room in the reserve")
	}
	if f.acquire(holderOf("192.0.2.9:1", "", false), 1) {
		t.Error("an unproven newcomer took from the reserve")
	}
	f.release(tenant, 64<<10)
	f.release(one, held)
	if f.holding() != int((crowd-held)/(64<<10)) {
		t.Errorf("%d holders after the releases", f.holding())
	}
}

// TestInFlightOneLargeBodyAlone: a body larger than the share is served
// when its holder holds nothing else.
func TestInFlightOneLargeBodyAlone(t *testing.T) {
	f := newInFlight(1<<20, 64<<10)
	h := holderOf("192.0.2.1:1", "", false)
	if !f.acquire(h, 512<<10) {
		t.Error("a lone 512 KiB step refused")
	}
	if f.acquire(h, 1) {
		t.Error("a holder past its share took more")
	}
}

// TestBodyClock: a body must keep arriving: within idle of each read, at
// the minimum rate after the first idle, and all within the total.
func TestBodyClock(t *testing.T) {
	start := time.Unix(1000, 0)
	c := bodyClock{start: start, idle: 5 * time.Second, minRate: 1024, total: 30 * time.Second}
	for _, tc := range []struct {
		at   time.Duration
		got  int64
		want time.Duration // after start
	}{
		{0, 0, 5 * time.Second},                                // the first idle
		{time.Second, 1024 * 100, 6 * time.Second},             // fast: idle after this read
		{4 * time.Second, 1, 5*time.Second + time.Second/1024}, // a byte in 4 s: due at the rate
		{10 * time.Second, 1024 * 4, 9 * time.Second},          // behind the rate: already past due
		{28 * time.Second, 1 << 20, 30 * time.Second},          // the total caps it
	} {
		if got := c.deadline(start.Add(tc.at), tc.got).Sub(start); got != tc.want {
			t.Errorf("at %v with %d bytes: deadline %v after the start, want %v", tc.at, tc.got, got, tc.want)
		}
	}
}
