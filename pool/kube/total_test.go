package kube

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// steady is the load of a replica that has had c requests in flight for
// ten minutes, on ready instances at their full ACT value.
func steady(c float64, ready int) replicaLoad {
	return replicaLoad{Conc6s: c, Conc1m: c, Conc10m: c, ACT: 1, Active: int(c), Ready: ready}
}

// The leader decides on the service's total concurrency with a pod's
// whole max concurrency (SPEC §3's ceil(8 / 6 / 0.6) = 3), wherever the
// requests come in; each replica deciding on its share (6 / 3 = 2), as
// before, asked for 7.
func TestTotalDecisionIsTheServiceNotAShare(t *testing.T) {
	cfg := autoscale.Config{MaxConcurrency: 6, MaxInstances: 10}
	now := time.Unix(1_000_000, 0) // a fake clock: nothing here reads the real one
	for _, tc := range []struct {
		name  string
		loads []replicaLoad
	}{
		{"8 through one of three", []replicaLoad{steady(8, 3), {}, {}}},
		{"8 spread 3/3/2", []replicaLoad{steady(3, 3), steady(3, 3), steady(2, 3)}},
	} {
		var d totalDecider
		var in []reported
		for _, l := range tc.loads {
			in = append(in, reported{load: l, seen: now.Add(-time.Second)})
		}
		rec, m := d.decide(now, cfg, in, 15*time.Second)
		if rec.Count != 3 {
			t.Errorf("%s: count %d from concurrency %v, want 3", tc.name, rec.Count, m.Concurrency1m)
		}
		if rec.Driver != autoscale.DriverConcurrency {
			t.Errorf("%s: driver %v, want concurrency", tc.name, rec.Driver)
		}
	}
	// What one replica of three carrying all 8 asked for on its own share.
	share := cfg
	share.MaxConcurrency = 6 / 3
	old := autoscale.NewCloudRun(share).Recommend(autoscale.Metrics{Concurrency1m: 8, Concurrency10m: 8, ACTCapacity: 2})
	if old.Count != 7 {
		t.Fatalf("a replica on its share asks for %d, want 7 (the issue's figure)", old.Count)
	}
}

// A replica whose report is older than the lease duration (gone without
// withdrawing it) no longer counts: its load drops out of the total.
func TestTotalDecisionDropsAStaleReport(t *testing.T) {
	cfg := autoscale.Config{MaxConcurrency: 6, MaxInstances: 10}
	const fresh = 15 * time.Second
	t0 := time.Unix(1_000_000, 0)
	var d totalDecider
	loads := []reported{
		{load: steady(12, 6), seen: t0}, // gone after this report
		{load: steady(3, 6), seen: t0},
	}
	if rec, _ := d.decide(t0.Add(time.Second), cfg, loads, fresh); rec.Count != 5 {
		t.Fatalf("both fresh: count %d, want ceil(15 / 6 / 0.6) = 5", rec.Count)
	}
	// The live replica keeps reporting; the other stops.
	loads[1].seen = t0.Add(fresh)
	if rec, _ := d.decide(t0.Add(fresh-time.Millisecond), cfg, loads, fresh); rec.Count != 5 {
		t.Fatalf("just under the lease duration: count %d, want 5 still", rec.Count)
	}
	rec, m := d.decide(t0.Add(fresh), cfg, loads, fresh)
	if m.Concurrency1m != 3 || rec.Count != 1 {
		t.Fatalf("the stale report still counts: concurrency %v, count %d; want 3 and 1", m.Concurrency1m, rec.Count)
	}
}

// The decision keeps the recommender's tolerance (a count within 10 % of
// the need is held) and the engine's bounds: min and max instances, and
// one while a request is in flight anywhere.
func TestTotalDecisionHoldsAndBounds(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var d totalDecider
	cfg := autoscale.Config{MaxConcurrency: 10, MaxInstances: 4, MinInstances: 0}
	if rec, _ := d.decide(now, cfg, []reported{{load: steady(24, 4), seen: now}}, time.Minute); rec.Count != 4 {
		t.Fatalf("need 4: count %d", rec.Count)
	}
	// 22 / 10 / 0.6 = 3.67 is within 10 % of 4: held.
	if rec, _ := d.decide(now.Add(time.Second), cfg, []reported{{load: steady(22, 4), seen: now}}, time.Minute); rec.Count != 4 || !rec.Held {
		t.Fatalf("need 3.67 after 4: %+v, want 4 held", rec)
	}
	if rec, _ := d.decide(now.Add(2*time.Second), cfg, []reported{{load: steady(600, 4), seen: now}}, time.Minute); rec.Count != 4 {
		t.Fatalf("need 100 at max instances 4: count %d", rec.Count)
	}
	tiny := replicaLoad{ACT: 1, Active: 1} // a request just arrived: nothing averaged yet
	if rec, _ := d.decide(now.Add(3*time.Second), cfg, []reported{{load: tiny, seen: now}}, time.Minute); rec.Count != 1 {
		t.Fatalf("a request in flight, no average yet: count %d, want 1", rec.Count)
	}
	cfg.MinInstances = 2
	if rec, _ := d.decide(now.Add(4*time.Second), cfg, nil, time.Minute); rec.Count != 2 {
		t.Fatalf("no load at min instances 2: count %d", rec.Count)
	}
}

// CPU is measured per pod, and every replica holding a pod reads its
// whole CPU: the total takes the largest replica's, not the sum. ACT is
// the concurrency-weighted mean of the replicas', as a fraction of the
// whole max concurrency.
func TestTotalDecisionCPUAndACT(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	cfg := autoscale.Config{MaxConcurrency: 10, MaxInstances: 100}
	var d totalDecider
	a := replicaLoad{CPU1m: 1.8, CPU10m: 1.8, ACT: 1, Ready: 3}
	b := replicaLoad{CPU1m: 1.8, CPU10m: 1.8, ACT: 1, Ready: 3}
	rec, m := d.decide(now, cfg, []reported{{load: a, seen: now}, {load: b, seen: now}}, time.Minute)
	if m.CPU1m != 1.8 || rec.Count != 3 || rec.Driver != autoscale.DriverCPU {
		t.Fatalf("two replicas on the same pods at 1.8 cores: cpu %v, %+v; want 1.8 and 3 by cpu", m.CPU1m, rec)
	}
	// Throttled to half on the busy replica, untouched on the idle one.
	busy := replicaLoad{Conc1m: 12, ACT: 0.5, Ready: 4}
	idle := replicaLoad{ACT: 1, Ready: 1}
	d = totalDecider{}
	rec, m = d.decide(now, cfg, []reported{{load: busy, seen: now}, {load: idle, seen: now}}, time.Minute)
	if m.ACTCapacity != 5 || rec.Count != 4 || rec.Driver != autoscale.DriverACT {
		t.Fatalf("ACT capacity %v, %+v; want 5 and ceil(12 / 5 / 0.6) = 4 by act", m.ACTCapacity, rec)
	}
}

// A report's load is another process's JSON: whatever it holds, the
// merged load and the decision on it are finite and bounded.
func FuzzReportLoad(f *testing.F) {
	f.Add([]byte(`{"id":"a","ask":1,"load":{"c6":8,"c60":8,"c600":8,"act":1,"active":8,"ready":3}}`))
	f.Add([]byte(`{"load":{"c60":-1,"act":7,"active":-5,"ready":-1,"cpu60":1e308}}`))
	f.Add([]byte(`{"load":{"c60":1e308,"c600":1e308,"c6":1e308,"active":9223372036854775807},"decision":{"count":-3}}`))
	f.Add([]byte(`{"load":{"c6":1},"shares":{"version":{"leader":"a","gen":3},"members":2,"parts":{"a":999999,"b":1}}}`))
	f.Add([]byte(`{"load":{"c6":1},"shares":{"members":1,"parts":{"a":9223372036854775807,"b":-9223372036854775807}}}`))
	cfg := autoscale.Config{MaxConcurrency: 6, MaxInstances: 50}
	f.Fuzz(func(t *testing.T, b []byte) {
		var rep report
		if json.Unmarshal(b, &rep) != nil || rep.Load == nil {
			return
		}
		now := time.Unix(1_000_000, 0)
		l := rep.Load.clean()
		m := merge([]replicaLoad{l, l, *rep.Load})
		for _, v := range []float64{m.Conc6s, m.Conc1m, m.Conc10m, m.CPU1m, m.CPU10m, m.ACT, l.weight()} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxLoadValue {
				t.Fatalf("merged load %+v out of bounds", m)
			}
		}
		var d totalDecider
		rec, _ := d.decide(now, cfg, []reported{{load: *rep.Load, seen: now}}, time.Minute)
		if rec.Count < 0 || rec.Count > cfg.MaxInstances {
			t.Fatalf("count %d", rec.Count)
		}
		if a := rep.Shares; a.valid() {
			sum := 0
			for id := range a.Parts {
				s := a.share(id, 6)
				if s < 1 || s > 6 {
					t.Fatalf("share %d of 6 under %+v", s, a)
				}
				sum += s
			}
			if sum > max(6, a.Members) {
				t.Fatalf("shares of 6 sum to %d under %+v", sum, a)
			}
		}
	})
}
