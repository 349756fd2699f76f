package autoscale

import (
	"testing"
	"time"
)

// cpuMetrics returns metrics where n current instances run at CPU
// utilisation util (1 CPU each) and nothing else loads the service.
func cpuMetrics(n int, util float64) Metrics {
	return Metrics{Current: n, Ready: n, Live: n, CPU1m: util * float64(n), ACTCapacity: DefaultMaxConcurrency}
}

func TestCloudRunToleranceBand54To66PercentHoldsCount(t *testing.T) {
	p := NewCloudRun(Config{})
	for _, util := range []float64{0.54, 0.55, 0.60, 0.65, 0.66} {
		rec := p.Recommend(cpuMetrics(10, util))
		if rec.Count != 10 || !rec.Held || rec.Driver != DriverCPU {
			t.Errorf("10 instances at %.0f%% CPU: got %+v, want 10 held by cpu", util*100, rec)
		}
	}
	// Just outside the band the count is recomputed.
	if rec := p.Recommend(cpuMetrics(10, 0.661)); rec.Count != 12 || rec.Held {
		t.Errorf("10 instances at 66.1%%: got %+v, want 12 (6.61 cores / 0.6 = 11.02 → 12)", rec)
	}
	if rec := p.Recommend(cpuMetrics(10, 0.539)); rec.Count != 9 || rec.Held {
		t.Errorf("10 instances at 53.9%%: got %+v, want 9 (5.39 / 0.6 = 8.98 → 9)", rec)
	}
}

func TestCloudRunToleranceFollowsACustomTarget(t *testing.T) {
	p := NewCloudRun(Config{CPUTarget: 0.8}) // band 72 %–88 %
	if rec := p.Recommend(cpuMetrics(10, 0.72)); rec.Count != 10 || !rec.Held {
		t.Errorf("target 80%%, at 72%%: got %+v, want 10 held", rec)
	}
	if rec := p.Recommend(cpuMetrics(10, 0.70)); rec.Count != 9 {
		t.Errorf("target 80%%, at 70%%: got %+v, want 9 (7 / 0.8 = 8.75 → 9)", rec)
	}
}

func TestCloudRunRoundsUp4Point1InstancesTo5(t *testing.T) {
	p := NewCloudRun(Config{})
	// 2.46 cores at a 60 % target of 1-CPU instances needs 4.1 instances.
	for _, current := range []int{0, 1, 3, 8} {
		m := cpuMetrics(current, 0)
		m.CPU1m = 2.46
		if rec := p.Recommend(m); rec.Count != 5 {
			t.Errorf("needing 4.1 instances from %d: got %+v, want 5", current, rec)
		}
	}
	// Exactly 4 needed (2.4 cores, computed as 4.000000000000001) stays 4.
	m := cpuMetrics(0, 0)
	m.CPU1m = 2.4
	if rec := p.Recommend(m); rec.Count != 4 {
		t.Errorf("needing exactly 4 instances: got %+v, want 4", rec)
	}
	// At 5 instances the 4.1 need is 49.2 % utilisation, below the band,
	// and the recomputation gives 5 again: the service stays over-provisioned
	// below target, as the rounding implies.
	m = cpuMetrics(5, 0)
	m.CPU1m = 2.46
	if rec := p.Recommend(m); rec.Count != 5 || rec.Held {
		t.Errorf("4.1 needed at 5 instances: got %+v, want 5 recomputed", rec)
	}
}

func TestCloudRunScalesDownOnlyBelow54Percent(t *testing.T) {
	p := NewCloudRun(Config{})
	for util := 0.66; util >= 0.54; util -= 0.01 {
		if rec := p.Recommend(cpuMetrics(20, util)); rec.Count != 20 {
			t.Fatalf("20 instances at %.2f utilisation went to %d", util, rec.Count)
		}
	}
	rec := p.Recommend(cpuMetrics(20, 0.53))
	if rec.Count != 18 { // 10.6 / 0.6 = 17.67 → 18
		t.Fatalf("20 instances at 53%%: got %+v, want 18", rec)
	}
}

func TestCloudRunDriverSelection(t *testing.T) {
	p := NewCloudRun(Config{})
	tests := []struct {
		name   string
		m      Metrics
		count  int
		driver Driver
	}{
		{"no load", Metrics{ACTCapacity: 80}, 0, DriverNone},
		{"cpu", Metrics{CPU1m: 3, Concurrency1m: 48, Concurrency10m: 48, ACTCapacity: 80}, 5, DriverCPU},
		// 1-min average 48, 10-min 144: max is 144 → 144 / 80 / 0.6 = 3.
		{"concurrency over 10 min", Metrics{CPU1m: 0.6, Concurrency1m: 48, Concurrency10m: 144, ACTCapacity: 80}, 3, DriverConcurrency},
		// ACT lowered to 10: 48 / 10 / 0.6 = 8, concurrency says 1.
		{"act", Metrics{CPU1m: 0.6, Concurrency1m: 48, Concurrency10m: 48, ACTCapacity: 10}, 8, DriverACT},
		// Ties go to CPU: 1.2 cores → 2, 96 requests → 2.
		{"tie", Metrics{CPU1m: 1.2, Concurrency1m: 96, Concurrency10m: 96, ACTCapacity: 80}, 2, DriverCPU},
	}
	for _, tt := range tests {
		rec := p.Recommend(tt.m)
		if rec.Count != tt.count || rec.Driver != tt.driver {
			t.Errorf("%s: got %+v, want %d by %v", tt.name, rec, tt.count, tt.driver)
		}
	}
}

func TestCloudRunCPUIsPerAllocatedCPU(t *testing.T) {
	// A single-threaded app using 1 core of a 4-CPU instance reads 25 %.
	p := NewCloudRun(Config{CPUsPerInstance: 4})
	if rec := p.Recommend(Metrics{CPU1m: 1, ACTCapacity: 80}); rec.Count != 1 {
		t.Fatalf("1 core of a 4-CPU instance: got %+v, want 1 (0.25 / 0.6 → 1)", rec)
	}
	if rec := p.Recommend(Metrics{CPU1m: 6, ACTCapacity: 80}); rec.Count != 3 {
		t.Fatalf("6 cores of 4-CPU instances: got %+v, want 3 (1.5 / 0.6 = 2.5 → 3)", rec)
	}
}

func kpaAt(s int, m Metrics) Metrics {
	m.Now = t0.Add(time.Duration(s) * time.Second)
	return m
}

func TestKnativeKPAStableAndPanic(t *testing.T) {
	p := NewKnativeKPA(Config{}) // 80 × 70 % = 56 requests per instance
	rec := p.Recommend(kpaAt(0, Metrics{Ready: 2, Current: 2, Concurrency1m: 100, Concurrency6s: 100}))
	if rec.Count != 2 || rec.Panic || rec.Driver != DriverConcurrency {
		t.Fatalf("stable: got %+v, want 2 (100 / 56 → 2), no panic", rec)
	}
	// Within the 2 s tick the last answer is repeated.
	if rec := p.Recommend(kpaAt(1, Metrics{Ready: 2, Current: 2, Concurrency1m: 1000, Concurrency6s: 1000})); rec.Count != 2 {
		t.Fatalf("inside the tick: got %+v, want the previous 2", rec)
	}
	// Burst: 6 s average 300 → 6 instances ≥ 2 × 2 ready: panic.
	rec = p.Recommend(kpaAt(2, Metrics{Ready: 2, Current: 2, Concurrency1m: 120, Concurrency6s: 300}))
	if !rec.Panic || rec.Count != 6 {
		t.Fatalf("burst: got %+v, want panic at 6", rec)
	}
	// Load falls: still panicking, no scale-down.
	rec = p.Recommend(kpaAt(4, Metrics{Ready: 6, Current: 6, Concurrency1m: 60, Concurrency6s: 60}))
	if !rec.Panic || rec.Count != 6 {
		t.Fatalf("after the burst: got %+v, want panic holding 6", rec)
	}
	// A stable window after the last panic condition, panic ends; scale
	// down is limited to half the ready instances per tick.
	rec = p.Recommend(kpaAt(62, Metrics{Ready: 6, Current: 6, Concurrency1m: 10, Concurrency6s: 10}))
	if rec.Panic || rec.Count != 3 {
		t.Fatalf("after the stable window: got %+v, want 3 (floor(6 / 2)), no panic", rec)
	}
}

func TestKnativeKPAScaleUpRateAndZeroGrace(t *testing.T) {
	p := NewKnativeKPA(Config{MaxConcurrency: 1}) // 0.7 requests per instance
	rec := p.Recommend(kpaAt(0, Metrics{Ready: 1, Current: 1, Concurrency1m: 5000, Concurrency6s: 5000}))
	if rec.Count != 1000 {
		t.Fatalf("huge burst from 1 ready: got %+v, want the 1000× rate limit", rec)
	}
	p = NewKnativeKPA(Config{})
	p.Recommend(kpaAt(0, Metrics{Ready: 1, Current: 1, Concurrency1m: 10, Concurrency6s: 10}))
	for s := 2; s < 30; s += 2 {
		if rec := p.Recommend(kpaAt(s, Metrics{Ready: 1, Current: 1})); rec.Count != 1 {
			t.Fatalf("idle for %d s: got %+v, want 1 during the 30 s grace", s-2, rec)
		}
	}
	if rec := p.Recommend(kpaAt(32, Metrics{Ready: 1, Current: 1})); rec.Count != 0 {
		t.Fatalf("idle for 30 s: got %+v, want 0", rec)
	}
}

func TestKubernetesHPA(t *testing.T) {
	p := NewKubernetesHPA(Config{}) // 60 % CPU target
	// 4 ready at 63 %: |1.05 − 1| ≤ 0.1, kept.
	rec := p.Recommend(kpaAt(0, Metrics{Ready: 4, CPU1m: 4 * 0.63}))
	if rec.Count != 4 || !rec.Held {
		t.Fatalf("within tolerance: got %+v, want 4 held", rec)
	}
	// 4 at 150 %: ceil(4 × 2.5) = 10, limited to max(4 + 4, 4 × 2) = 8.
	rec = p.Recommend(kpaAt(15, Metrics{Ready: 4, CPU1m: 4 * 1.5}))
	if rec.Count != 8 {
		t.Fatalf("scale-up: got %+v, want 8", rec)
	}
	// Within the same 15 s period nothing more: the next sync is 15 s on.
	// 8 at 30 %: raw 4, but the highest recommendation of the last 300 s
	// is 10, capped at current 8.
	rec = p.Recommend(kpaAt(30, Metrics{Ready: 8, CPU1m: 8 * 0.3}))
	if rec.Count != 8 {
		t.Fatalf("stabilised scale-down: got %+v, want 8", rec)
	}
	// 300 s after the 10, the window holds only 4s: scale down to 4.
	for s := 45; s < 330; s += 15 {
		p.Recommend(kpaAt(s, Metrics{Ready: 8, CPU1m: 8 * 0.3}))
	}
	if rec := p.Recommend(kpaAt(330, Metrics{Ready: 8, CPU1m: 8 * 0.3})); rec.Count != 4 {
		t.Fatalf("after 300 s of low load: got %+v, want 4", rec)
	}
	if rec := p.Recommend(kpaAt(345, Metrics{Ready: 0})); rec.Count != 0 {
		t.Fatalf("no ready instance: got %+v, want 0", rec)
	}
}
