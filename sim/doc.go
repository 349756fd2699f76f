// Package sim runs clients, the throttle and the autoscaler together on a
// virtual clock, so that throttling, retry and autoscaling policies can be
// compared on the same load before they meet production.
//
// A run is a deterministic discrete-event simulation: events (arrivals,
// attempts, request completions, instance starts, once-a-second ticks) sit in
// a min-heap ordered by virtual time, then by the order they were scheduled.
// There are no goroutines and no real time. Arrivals, service times and retry
// jitter draw from three math/rand/v2 PCG streams seeded with Scenario.Seed, so
// a run is reproducible, and runs that differ only in retry or backend
// settings see the same arrivals.
//
// # The model
//
//   - Clients: groups of callers of one API action, each with an arrival
//     process (Constant or Poisson) whose rate can change at given times
//     (Steps), plus an optional Burst of simultaneous calls.
//   - Throttle: the real token bucket of package bucket, with the limit
//     package quota gives the action's category (ECS DescribeClusters: 50
//     tokens, 20 per second), shared by every action of the category. A
//     throttled attempt fails at once.
//   - Quota increases: Scenario.Increases are requests to package
//     servicequotas (a Service with the run's QuotaPolicy and the virtual
//     clock), made at their time and approved by the policy at once or
//     by the scenario's operator at ApproveAt; an approved value is the
//     bucket's limit from that instant, as on a gateway, and the bucket
//     keeps its state (GCRA: its debt as time), so after a rate increase
//     a tenant in debt waits until the debt fits the new burst window.
//   - Retries: a throttled call (or one the backend rejected with HTTP 429)
//     is retried after the wait of a retry.Schedule (by default exponential
//     backoff with additive jitter: 1+r, 2+r, 4+r … seconds), up to Retry.MaxAttempts and within
//     Retry.Deadline, each retry paid from the group's retry.Budget if one is
//     set. WithoutJitter removes a schedule's randomness: the thundering herd.
//   - Backend: admitted calls are routed by an autoscale.Engine (Cloud Run,
//     Knative KPA or Kubernetes HPA policy). Instances become ready after
//     Backend.ColdStart; each running request uses Backend.CPUPerRequest cores
//     for a service time drawn from Backend.Distribution. Once a virtual
//     second the engine gets Observe for every instance (its average
//     concurrency and CPU over that second) and then Tick. Requests left
//     pending too long at max instances fail with 429, counted apart from
//     throttles.
//   - Revisions and traffic: a backend may have several revisions
//     (Backend.Revisions, named SERVICE-00001, ...), each its own engine,
//     instances and max instances, and a traffic block in the server's
//     shape (revision or latest_revision, percent, tag). Untagged calls
//     are split by autoscale.Split, the pool's weighted round robin over
//     100 slots; a group's Tag reaches its revision directly. Traffic
//     changes at given times (TrafficChanges) and new revisions roll out
//     as package pool rolls them out: the receiving revision is first
//     started up to the instances its new share of the serving load
//     needs (a new revision at least one), and the split moves once
//     they are ready, or at the rollout timeout if at least one is; with
//     none ready then, traffic stays where it was. A revision left without share or tag drains by
//     its requests, its instances counted over max (Second.OverMax)
//     beyond the latest revision's max instances, for at most the
//     request timeout and 15 minutes, when the calls still on it are cut
//     off. Result.Revisions and Result.TrafficLog show each revision and
//     each step. Autoscale.GPUs > 0 keeps idle instances 10 minutes.
//   - Calls over several buckets: a group's RunTask parameters (Count,
//     LaunchType, CapacityProvider) give it the buckets package quota
//     charges for that body (ECS cluster-resource-modify, Fargate's
//     RunTask calls and tasks launched, count tokens), taken all or none
//     as the gateway's limiter.TakeAll takes them; Result.Buckets shows
//     each bucket.
//
// Run returns a Result: a per-second time series (attempts, first attempts,
// retries, admitted, throttled, 429s, completed and failed calls, instances
// starting, ready and draining, latency percentiles) and summary totals.
// WriteSummary, WriteCSV, WritePlot and WriteComparisonPlot report it.
//
// A Player plays recorded arrivals (package replay's CloudTrail logs)
// rather than generated ones through the same buckets and retry policies,
// with no backend, on the arrivals' own clock.
// A Scaler plays recorded requests with their service times (package
// replay's HTTP access logs) through the backend alone, as Run does the
// calls its throttle admits: the same runner, engine and instances.
//
// # Scenario files
//
// ParseStudy and LoadStudy read a YAML scenario file into a Study: one
// scenario plus variants under runs, each replacing whole blocks of it.
// Unknown fields (with the known ones listed), fields given twice and bad
// values are errors of the form "file:line:column: field.path: message",
// as package config's errors are, every one of them reported. Preset
// returns the built-in studies (PresetNames lists them), whose files in
// the presets directory show the format;
// testdata/reference.yaml lists every field.
package sim
