package sim

import (
	"testing"
	"time"
)

// BenchmarkRun10MinAt1000PerSecond simulates 10 minutes of Poisson load at
// 1,000 Cloud Map calls per second (about 600,000 calls) through the bucket
// and a Cloud Run backend.
func BenchmarkRun10MinAt1000PerSecond(b *testing.B) {
	sc := Scenario{
		Duration: 10 * time.Minute,
		Target:   Target{Service: "cloudmap", Action: "DiscoverInstances"},
		Clients:  []Clients{{Process: Poisson, Rate: 1000}},
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := Run(sc)
		if err != nil {
			b.Fatal(err)
		}
		if res.Summary.Calls < 590_000 {
			b.Fatalf("%+v", res.Summary)
		}
	}
}

// BenchmarkRunThrottledHerd simulates 10 minutes of 1,000 ECS calls per
// second against the 50/20 cluster-read bucket with default-schedule retries (additive jitter):
// most attempts are throttled and retried.
func BenchmarkRunThrottledHerd(b *testing.B) {
	sc := Scenario{
		Duration: 10 * time.Minute,
		Clients:  []Clients{{Process: Poisson, Rate: 1000}},
		Retry:    Retry{MaxAttempts: 5},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(sc); err != nil {
			b.Fatal(err)
		}
	}
}
