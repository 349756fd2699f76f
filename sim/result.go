package sim

// This file is what a run returns: its seconds, summaries and retries,
// and how the runner sums them up.

import (
	"math"
	"slices"
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// Second is what happened during one second of virtual time.
type Second struct {
	// Start is the second's start, from the start of the run.
	Start time.Duration
	// Attempts is FirstAttempts + Retries: the calls offered to the throttle.
	Attempts int
	// FirstAttempts are new calls; Retries are later attempts of earlier ones.
	FirstAttempts, Retries int
	// Admitted attempts took a token; Throttled ones found the bucket empty.
	Admitted, Throttled int
	// Rejected are requests the backend answered with HTTP 429 after they
	// waited too long pending at max instances.
	Rejected int
	// Completed calls succeeded; Failed calls were given up (retries
	// exhausted, deadline, budget, or retries disabled).
	Completed, Failed int
	// Starting, Ready and Draining count backend instances at the end of
	// the second; InFlight and Pending its requests.
	Starting, Ready, Draining, InFlight, Pending int
	// Recommended is the autoscaler's count at the second's start (the
	// sum over the revisions not replaced).
	Recommended int
	// OverMax counts, at the end of the second, the instances of replaced
	// revisions beyond the latest revision's max instances, finishing
	// their requests (see RevisionSeries.OverMax).
	OverMax int
	// P50 and P99 are percentiles of the end-to-end latency (first attempt
	// to completion) of the calls completed in the second; zero when none.
	P50, P99 time.Duration
}

// Summary totals a run.
type Summary struct {
	// Calls is the number of calls started; each ends Succeeded, Failed,
	// or Unfinished when the run ended first.
	Calls, Succeeded, Failed, Unfinished int
	// Attempts = Calls' first attempts + Retries.
	Attempts, Retries int
	// Admitted, Throttled and Rejected count attempts as in Second.
	Admitted, Throttled, Rejected int
	// BudgetRefusals counts retries the client budget refused.
	BudgetRefusals int
	// SuccessRate is Succeeded / Calls: calls still unfinished at the end
	// count as not succeeded; 1 when there were no calls.
	SuccessRate float64
	// MeanLatency, P50Latency, P99Latency and MaxLatency describe the
	// end-to-end latency of the calls that succeeded.
	MeanLatency, P50Latency, P99Latency, MaxLatency time.Duration
	// InstanceSeconds sums, over the seconds, the instances starting, ready
	// or draining at each second's end; PeakInstances is their largest sum.
	InstanceSeconds, PeakInstances int
}

// GroupSummary totals the calls of one client group.
type GroupSummary struct {
	// Name is the group's name.
	Name string
	// Calls, Succeeded, Failed and Unfinished count the group's calls as
	// in Summary.
	Calls, Succeeded, Failed, Unfinished int
	// Retries, Throttled and Rejected count the group's attempts.
	Retries, Throttled, Rejected int
	// SuccessRate is Succeeded / Calls: calls still unfinished at the end
	// count as not succeeded; 1 when there were no calls.
	SuccessRate float64
	// MeanLatency and P99Latency describe the end-to-end latency of the
	// group's calls that succeeded.
	MeanLatency, P99Latency time.Duration
	// Revisions counts the group's attempts routed to each revision, by
	// name; nil for a backend without revisions.
	Revisions map[string]int
}

// RetryRecord is one retry decision, kept when Scenario.RecordRetries is set.
type RetryRecord struct {
	// Call numbers the call from 0 in the order calls started.
	Call int
	// Attempt is the attempt that failed, from 1.
	Attempt int
	// At is when it failed; Delay is the wait before the next attempt.
	At, Delay time.Duration
}

// Result is the outcome of Run.
type Result struct {
	// Scenario is the scenario run, with its defaults applied.
	Scenario Scenario
	// Limit is the bucket limit of the scenario's target.
	Limit bucket.Limit
	// Seconds is the time series, one entry per second of Duration.
	Seconds []Second
	// Summary totals the run.
	Summary Summary
	// Groups totals each client group, in the order of Scenario.Clients.
	Groups []GroupSummary
	// RetryLog lists every retry when Scenario.RecordRetries is set.
	RetryLog []RetryRecord
	// LimitChanges lists the changes of the target's limit that
	// Scenario.Increases made, in time order; Limit is the one it started
	// with.
	LimitChanges []LimitChange
	// Revisions are the time series of each revision of a backend with
	// revisions or traffic (Backend.Revisions, Traffic, TrafficChanges);
	// nil otherwise.
	Revisions []RevisionSeries
	// TrafficLog lists the steps of the rollouts and traffic changes, as
	// the pool logs them.
	TrafficLog []TrafficEvent
	// Buckets are the time series of the buckets of the client groups
	// whose calls take from several (ECS RunTask on Fargate); nil when
	// none does.
	Buckets []BucketSeries
}

func (g *group) summary() GroupSummary {
	s := g.sum
	s.Name = g.Name
	s.Unfinished, s.SuccessRate = outcome(s.Calls, s.Succeeded, s.Failed)
	if len(g.lat) > 0 {
		s.MeanLatency, _, s.P99Latency, _ = latencyStats(g.lat)
	}
	return s
}

// outcome is the calls still running at the end, and the share of all
// calls that succeeded (1 when there were none).
func outcome(calls, succeeded, failed int) (unfinished int, successRate float64) {
	successRate = 1
	if calls > 0 {
		successRate = float64(succeeded) / float64(calls)
	}
	return calls - succeeded - failed, successRate
}

// latencyStats sorts lat (nanoseconds, not empty) and returns its mean,
// median, 99th percentile and maximum.
func latencyStats(lat []int64) (mean, p50, p99, maxLat time.Duration) {
	slices.Sort(lat)
	var total float64
	for _, l := range lat {
		total += float64(l)
	}
	return time.Duration(math.Round(total / float64(len(lat)))),
		time.Duration(percentile(lat, 0.50)),
		time.Duration(percentile(lat, 0.99)),
		time.Duration(lat[len(lat)-1])
}

func (r *runner) summarise() {
	s := &r.sum
	s.Calls = r.started
	for _, sec := range r.secs {
		s.Attempts += sec.Attempts
		s.Retries += sec.Retries
		s.Admitted += sec.Admitted
		s.Throttled += sec.Throttled
		s.Rejected += sec.Rejected
		n := sec.Starting + sec.Ready + sec.Draining
		s.InstanceSeconds += n
		s.PeakInstances = max(s.PeakInstances, n)
	}
	s.Unfinished, s.SuccessRate = outcome(s.Calls, s.Succeeded, s.Failed)
	if len(r.latencies) > 0 {
		s.MeanLatency, s.P50Latency, s.P99Latency, s.MaxLatency = latencyStats(r.latencies)
	}
}
