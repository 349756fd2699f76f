// Package autoscale is a request-driven autoscaler modelled on Cloud Run's
// published behaviour (SPEC §3): metric-based recommendations from CPU,
// concurrency and adaptive concurrency throttling (ACT) with a ±10 %
// tolerance band, on-demand scaling with a pending queue, ranked routing
// to recommended and surplus instances, and scale-down of surplus and idle
// instances.
//
// The Engine is a pure state machine. It starts no goroutine, does no I/O
// and never reads the clock: every method takes the current time, so a
// gateway can drive it with time.Now and a simulator with a virtual clock.
// An Engine is not safe for concurrent use; serialise calls to it.
//
// # Lifecycle
//
// The caller (gateway or simulator) owns the real instances and requests;
// the engine decides. Each step returns what the caller must do (Events):
//
//   - Route(now) for every incoming request. The request is Served on an
//     instance, or Queued (possibly on an instance the engine just started
//     on demand: RouteResult.Started).
//   - RequestDone(now, id) when a request finishes (or is abandoned while
//     pending). Freed slots go to pending requests (Events.Dispatched); a
//     draining instance left empty is Stopped.
//   - InstanceReady(now, id) when an instance the engine started (from
//     Route, or Events.Started) can serve. Its start time updates the
//     expected cold start; pending requests are dispatched to it.
//   - Observe(now, id, cpuCores, concurrency) once a second per instance:
//     the CPU (in cores) it used and its average concurrent requests over
//     that second. Samples feed the metric windows and ACT. A caller whose
//     measurements do not fall on whole seconds (a ticker that runs late)
//     uses ObserveSpan(from, to, id, cpuCores, concurrency) instead: the
//     averages over [from, to), split over the seconds it covers by time.
//   - Tick(now) once a second: the recommendation (Decision.Count and
//     which Driver won), instances to start, drain and stop, pending
//     requests dispatched or rejected with HTTP 429.
//   - InstanceExited(now, id) when an instance exits without being told
//     to (a crash, a failed start, a lost process), in any state. The
//     engine forgets it; the requests that were running on it come back
//     in Events.Failed (answer them HTTP 502; no RequestDone for them);
//     pending requests expected on it are placed again as Route would,
//     which may dispatch them (Events.Dispatched) or start a replacement
//     on demand (Events.Started). Replacing lost capacity otherwise is the
//     next Tick's, as for any shortfall. Backing off a crash-looping
//     command is the caller's: it may start a Started instance late.
//
// Instances go Starting → Ready → (Draining →) Stopped, or leave from any
// state through InstanceExited. The engine never stops a starting
// instance. Instance and request IDs are never reused.
//
// # Metric windows
//
// Seconds are counted from the engine's first call with time.Time.Sub, so
// they follow the monotonic clock of times taken with time.Now: a wall-clock
// step does not disturb the windows. Samples are kept per second, per
// instance and summed for the service, in
// a ring of 600 one-second buckets with running sums for 6 s, 1 min and
// 10 min, stored as integer milli-units so that sums never drift: O(1) per
// sample and per elapsed second. A second in which nothing was reported
// counts as zero (no CPU used, no request running), from the first sample
// on; seconds before the first sample are outside the history, so a young
// window averages over the seconds it has seen.
//
// # Recommendation
//
// The Cloud Run recommender (CloudRun, the default Policy) takes the
// largest of
//
//	CPU:         ceil((CPU1m / CPUs per instance) / CPU target)
//	concurrency: ceil((max(conc1m, conc10m) / max concurrency) / concurrency target)
//	ACT:         ceil((conc1m / mean ACT of ready instances) / concurrency target)
//
// where CPU1m and conc1m/conc10m are the service's total usage averaged
// per second over 1 and 10 minutes. While the largest need is within
// Tolerance (±10 %) of the current count the count stays; outside, it is
// recomputed from the need and rounded up. The engine then bounds it to
// [MinInstances, MaxInstances], keeps at least one instance while any
// request is in flight or pending, and drops it to zero (then min) when no
// instance is running and nothing asks for one, or when the service has had
// no request for Config.IdleTimeout (CPU alone, which never reads exactly
// zero, does not hold instances up).
//
// Two baseline policies implement the same Policy interface from their
// published behaviour, so a simulator can compare all three on one trace:
// KnativeKPA and KubernetesHPA. A policy only chooses the count; routing,
// the pending queue and instance shutdown are the engine's.
//
// # Routing and on-demand scaling
//
// Ready instances are ranked in the order they became ready; the first
// Count are recommended, the rest are surplus. A request goes to a free
// slot (requests in flight below the instance's ACT value) on a
// recommended instance, else on a surplus one; else it is queued on a
// starting instance expected ready no later than a new one, else on an
// existing instance if a slot is expected to free sooner, else a new
// instance is started on demand while below max instances.
//
// The expected wait on a full ready instance comes from S, the mean
// observed request time (exact over the first 1,000 requests, then a moving
// average weighing the newest 1/1,000), and F, how long the instance has
// been full (since a request last started or finished on it): a slot is
// expected to free every
//
//	I = max(S / ACT, F)
//
// (the fluid rate of its slots; or, once it has gone longer than that
// without freeing one, as long again as it has gone: its requests have
// outrun the mean, which no longer says when they end), so a request
// queued behind q others waits I × (q + 1), plus a slot per request in
// flight above ACT after ACT fell. While slots free at the rate S implies,
// this is the fluid S × (q + 1) / ACT; and no more requests queue on a busy
// instance than slots can free, at that interval, before a new instance
// would be ready. With no request time observed yet there is no estimate,
// and no request queues on a ready instance while a new one may start.
//
// A burst of long requests arriving all at once, when only short ones have
// been seen, still queues on the busy instance: nothing says otherwise yet.
// So on every Tick the pending requests expected on full ready instances
// are judged again, oldest first, each at its place in its instance's
// queue: those whose wait is no longer under the expected cold start move
// to a starting instance expected ready by then, or to a new one started
// on demand below max instances, keeping their deadlines. A burst thus gets
// instances once its instance has gone about a cold start without a slot
// freeing (the oldest request queued: one cold start; the others sooner),
// rather than after a slot or the pending wait. Wherever a pending request
// is expected, a freed slot anywhere goes to the oldest pending request
// first.
//
// A queued request waits at most max(10 s, 3.5 × expected cold start),
// the expected cold start being the mean of observed starts
// (Config.InitialColdStart before any), raised to how long the oldest
// instance still starting has been starting (a start in progress for t
// shows a cold start takes at least t), and judged at every Tick; then a
// new instance is started for it (and it waits for that one up to the same
// time again), or at max instances it fails with HTTP 429. So a request
// waiting for a slow first start gets no hedge instance while that start
// goes on. Pending requests are served oldest first.
//
// The window averages end at the last complete second: the current second
// once a sample for it is in, else the one before, so a Tick on a second
// not yet observed does not read it as idle. Zero instances is decided by
// requests only: a live instance stays recommended until the idle timeout
// whatever the metrics read (Decision.Idle marks the idle drop, and
// Decision.Exited the drop when the last instances exit on their own).
//
// # Scale-down
//
// A surplus instance that has been ready for a minute and whose
// utilisation over the last minute (the larger of CPU and concurrency
// utilisation) is under 10 % is stopped, or drained if requests still run
// on it. The other surplus instances stay until they have been idle for
// Config.IdleTimeout (default 15 minutes).
//
// The 1-minute averages lag a step up in load: read literally, the rule
// stops the surplus instances that the new load is just starting to use.
// So, unless Config.LiteralSurplusStop is set, no surplus instance is
// stopped for low utilisation while a request is pending, nor while it
// ranks within the recent need: the instances that the last 6 seconds'
// demand needs at the targets (CPU, and concurrency or the requests in
// flight now if more, against the mean ACT value), the span of Knative's
// panic window. Such instances still stop after the idle timeout. The engine never goes below
// MinInstances, and never to zero while a request is in flight or pending
// nor before the service has gone Config.IdleTimeout without a request:
// idle retention counts from the last request that arrived or finished,
// however short (a 0.5 ms request reads as zero concurrency in the
// windows, and idle CPU as zero in a simulator, but both count here).
//
// MaxInstances is a strict bound on starting, ready and draining instances
// together. Cloud Run may briefly exceed its maximum during traffic spikes
// or instance replacement; that overshoot is not emulated.
package autoscale
