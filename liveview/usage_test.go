package liveview

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

func tenant(n int) quota.Key {
	return quota.Key{Service: "ecs", Account: fmt.Sprintf("%012d", n), Region: "us-east-1", Category: "cluster-read"}
}

func find(v UsageView, k quota.Key) (KeyUsage, bool) {
	for _, u := range v.Keys {
		if u.Key == k {
			return u, true
		}
	}
	return KeyUsage{}, false
}

func TestUsagePeaksAndThrottlesOverTheHour(t *testing.T) {
	r := New(Options{UsageWindow: 60})
	r.Tick(t0)
	// Minute 0: tenant 1 drains 40 of 50 tokens, tenant 2 uses 5, tenant 3
	// is throttled 7 times.
	for i := int64(1); i <= 40; i++ {
		r.Used(tenant(1), i, 50)
	}
	r.Used(tenant(2), 5, 50)
	r.Used(tenant(3), 50, 50)
	for range 7 {
		r.Throttled(tenant(3))
	}
	r.Tick(t0.Add(30 * time.Second))
	v := r.Usage(0, nil)
	if len(v.Keys) != 3 || v.Keys[0].Key != tenant(3) || v.Keys[0].Throttled != 7 || v.Keys[0].ErrorBound != 0 || v.Keys[0].Peak != 1 {
		t.Fatalf("within the first minute: %+v, want tenant 3 first with 7 exact throttles", v.Keys)
	}
	if u := v.Keys[1]; u.Key != tenant(1) || u.PeakUsed != 40 || u.Capacity != 50 || u.Peak != 0.8 {
		t.Errorf("second %+v, want tenant 1 at 40/50", u)
	}
	if v.Window != 30*time.Second {
		t.Errorf("window %v, want the 30 s since the first tick", v.Window)
	}
	// 30 minutes later tenant 1 peaks lower, under a raised capacity:
	// the hour's peak is still minute 0's.
	r.Tick(t0.Add(30 * time.Minute))
	r.Used(tenant(1), 60, 100)
	r.Throttled(tenant(3))
	r.Tick(t0.Add(30*time.Minute + time.Second))
	v = r.Usage(0, nil)
	if u, _ := find(v, tenant(1)); u.PeakUsed != 40 || u.Capacity != 50 {
		t.Errorf("after 30 minutes tenant 1 is %+v, want its peak of 40/50", u)
	}
	if u, _ := find(v, tenant(3)); u.Throttled != 8 {
		t.Errorf("tenant 3 throttled %d, want 7+1", u.Throttled)
	}
	// An hour after minute 0 it has left the window.
	r.Tick(t0.Add(60*time.Minute + time.Second))
	v = r.Usage(0, nil)
	if u, _ := find(v, tenant(1)); u.PeakUsed != 60 || u.Capacity != 100 {
		t.Errorf("after an hour tenant 1 is %+v, want the later peak 60/100", u)
	}
	if _, ok := find(v, tenant(2)); ok {
		t.Errorf("tenant 2 used its bucket only in minute 0, an hour ago: %+v", v.Keys)
	}
	if u, _ := find(v, tenant(3)); u.Throttled != 1 {
		t.Errorf("tenant 3 throttled %d in the last hour, want 1", u.Throttled)
	}
	if v.Window != 59*time.Minute+time.Second {
		t.Errorf("window %v, want from minute 1's start to the last tick", v.Window)
	}
	// The match filter and n.
	v = r.Usage(1, func(k quota.Key) bool { return k.Account == tenant(1).Account })
	if len(v.Keys) != 1 || v.Keys[0].Key != tenant(1) {
		t.Errorf("matching tenant 1: %+v", v.Keys)
	}
}

// A flood of accounts each using its bucket a little (hostile key
// cardinality) neither grows memory past the tables nor pushes out the
// tenants that ran close to their limits.
func TestUsageBoundedUnderHostileCardinality(t *testing.T) {
	const capacity = 16
	r := New(Options{UsageCapacity: capacity, HotCapacity: capacity})
	r.Tick(t0)
	for i := range 5 {
		r.Used(tenant(i), int64(45+i), 50) // tenants 0..4: 90% to 98%
	}
	for i := 1000; i < 201000; i++ {
		r.Used(tenant(i), 1, 50) // one request each: 2%
		if i%1000 == 0 {
			r.Used(tenant(3), 49, 50) // tenant 3 keeps running close
			r.Throttled(tenant(4))
			r.Throttled(tenant(i)) // a one-off throttle of a flood account
		}
		if i%5000 == 0 {
			r.Tick(t0.Add(time.Duration(i/5000) * time.Second))
		}
	}
	if n := len(r.use.peaks.heap); n > capacity {
		t.Fatalf("peak table holds %d keys, more than its %d", n, capacity)
	}
	if n := r.use.hot.Len(); n > capacity {
		t.Fatalf("throttle summary holds %d keys, more than its %d", n, capacity)
	}
	v := r.Usage(0, nil)
	if len(v.Keys) > 2*capacity {
		t.Fatalf("%d keys in the view, more than the two tables hold", len(v.Keys))
	}
	for i := range 5 {
		u, ok := find(v, tenant(i))
		want := int64(45 + i)
		if i == 3 {
			want = 49
		}
		if !ok || u.PeakUsed != want || u.Capacity != 50 {
			t.Errorf("tenant %d: %+v (present %v), want its exact peak %d/50", i, u, ok, want)
		}
	}
	if v.Keys[0].Key != tenant(4) || v.Keys[0].Throttled < 200 || v.Keys[0].Throttled-v.Keys[0].ErrorBound > 200 {
		t.Errorf("most throttled %+v, want tenant 4 with 200 throttles within its bound", v.Keys[0])
	}
	if v.PeakFloor != 0.02 {
		t.Errorf("peak floor %v, want the flood's 2%%", v.PeakFloor)
	}
}

// A decision that cannot raise a peak is not even buffered once the
// table is full.
func TestUsedSkipsWhatCannotRaiseAPeak(t *testing.T) {
	r := New(Options{UsageCapacity: 2})
	r.Tick(t0)
	r.Used(tenant(1), 10, 10)
	r.Used(tenant(2), 5, 10)
	r.Tick(t0.Add(time.Second)) // folds: the table is full, floor 50%
	before := 0
	for i := range r.use.shards {
		before += len(r.use.shards[i].buf)
	}
	r.Used(tenant(3), 5, 10)
	r.Used(tenant(3), 1, 10)
	after := 0
	for i := range r.use.shards {
		after += len(r.use.shards[i].buf)
	}
	if after != before {
		t.Errorf("buffered %d bytes for uses at or below the floor", after-before)
	}
	r.Used(tenant(3), 6, 10)
	if v := r.Usage(0, nil); len(v.Keys) != 2 || v.Keys[1].Key != tenant(3) || v.PeakFloor != 0.6 {
		t.Errorf("after a use above the floor: %+v floor %v, want tenants 1 and 3", v.Keys, v.PeakFloor)
	}
	// A new minute starts an empty table: anything is buffered again.
	r.Tick(t0.Add(time.Minute))
	if r.useFloor.Load() != 0 {
		t.Errorf("floor %d in a fresh minute, want 0", r.useFloor.Load())
	}
}
