// Package pool runs the instances of request-driven autoscaled services on
// one machine, the way Cloud Run runs a revision's containers (SPEC §3): it
// drives one autoscale.Engine per service revision, starts and stops
// instances through a Runner, measures them once a second, and routes and
// proxies requests to them.
//
// The pool is rooms of one idea each, imports going one way: this
// package holds each service's revisions and the moves of traffic among
// them (rollouts, SetTraffic, revisions kept retired and across
// restarts); package pool/revision one revision's lifecycle (its engine,
// instances, liveness, registry and pending requests), read by the moves
// here only through its methods and State, a snapshot under its lock;
// package pool/traffic the traffic block, tags, the sticky key and the
// resolved split, knowing no revision; package pool/forward the data path
// that carries a request to its instance and the answer back; and
// package pool/runner the seam to what runs instances (Runner, Instance),
// which pool/process and pool/kube fill. This package names the seam's
// and a revision's types too (Runner, Instance, Liveness, ScaleEvent, …),
// so that one import does.
//
// The pool owns the engine's clock and every goroutine it needs; it never
// starts a process itself (a Runner does: package pool/process for local
// processes) and never decides a count (the engine does). Nothing starts
// in a constructor: goroutines run inside Run and have stopped when it
// returns.
//
// # Lifecycle
//
//   - New(Options) builds an empty pool; Apply(specs) sets its services
//     (again on every config reload).
//   - Run(ctx) drives every service: one loop per service reads the clock
//     once a second, measures each instance (time-weighted concurrency,
//     CPU), feeds Engine.Observe and Engine.Tick, and acts on the events.
//     When ctx ends, Run stops every instance (SIGTERM, the service's
//     grace period, then a kill) and returns once all have exited.
//   - Handler(name) serves a service's requests: route, wait in the
//     pending queue if needed, proxy, and release the slot by scope.
//   - AdminHandler lists services and instances as JSON.
//
// A caller shuts down in two phases: first the HTTP server (stop
// accepting, finish requests in flight), then the pool's context.
//
// # Requests
//
// Each request is bounded by its service's request timeout
// (ServiceSpec.RequestTimeout, default 300 s as Cloud Run), from its
// arrival to its last byte, its pending wait included; it replaces the
// server's read and write deadlines for the request
// (http.ResponseController), and once it passes the request is answered
// 504. A request routed to a free slot is proxied at once. A queued
// request waits on its own channel, closed when the engine dispatches it;
// it is answered 429 when the engine rejects it (every instance busy at
// max instances for the whole pending wait), with Retry-After set to that
// pending wait in seconds (max(10 s, 3.5 × expected cold start), rounded
// up): no slot freed for that long, so a retry sooner would most likely
// wait as long again; 429 at once, with Retry-After, when
// ServiceSpec.MaxPending requests already wait; 503 with the reason when
// the start it waits for failed, and at once while the replacement's
// crash-loop backoff lasts; and it is dropped from the queue when the
// client goes away. A failed proxy attempt is always answered with an
// error status, never left to net/http's implicit 200: 504 once the
// request timeout has passed, 502 otherwise; a request on an instance
// that exited on its own gets a 502 that says so.
//
// # Instances
//
// An instance the engine starts is started by the Runner; once ready, its
// start-to-ready time is the engine's cold start. An instance that exits
// on its own is reported to the engine (Engine.InstanceExited), which
// replaces it as needed: for pending requests, or up to min instances;
// with no request pending (those waiting for a failed start are answered
// 503 first) only a new request starts one. After repeated failures each
// replacement starts no sooner than a capped exponential backoff (1 s
// doubling up to 1 min) after the last failure, logged and exported as
// tollgate_pool_restart_backoff_seconds.
//
// With a liveness check (ServiceSpec.Liveness, as Cloud Run's liveness
// probe) each ready instance is probed on its own address from its own
// goroutine; one that fails the check FailureThreshold times in a row is
// unhealthy: the engine forgets it, so it takes no new request, and a
// replacement starts at the next tick, beyond max instances when the
// revision is at max (tollgate_pool_instances_over_max, reason
// unhealthy, and the log line that names the instance and its bound).
// The unhealthy instance stops once its requests in flight have finished,
// or at the request timeout or MaxOverMaxGrace after it was found
// unhealthy, whichever is first; the requests it still runs then get the
// 502 of an instance that exited while serving them. A crashed instance
// is gone, so its replacement is an ordinary start within max instances.
//
// # Revisions
//
// A reload that changes only targets and bounds applies them to the
// running engine (Engine.SetConfig): no instance is restarted. A reload
// that changes what runs (ServiceSpec.Template: for tollgate serve the
// command, arguments, environment, working directory, readiness and
// liveness checks and grace period) makes a new revision, named as Knative names them
// (hello-00001, hello-00002, ...): it starts as many instances as the
// serving revisions' recommendations call for, times its share (at least
// one whatever its share), and becomes the latest ready revision once
// they are ready, or at the rollout timeout (ServiceSpec.RolloutTimeout)
// if at least one is. A revision with no instance ready by then has
// failed, as on Cloud Run: traffic stays where it was, and the log,
// tollgate_pool_rollouts_total and RevisionStatus.State say so.
//
// # Traffic
//
// A service's traffic (ServiceSpec.Traffic, or SetTraffic) splits its
// untagged requests over its running revisions by percent, a weighted
// round robin over 100 slots, as Knative's and Cloud Run's traffic block;
// without one the latest ready revision takes them all. A tag reaches its
// revision by a Host TAG---... or traffic.TagHeader. Each revision has its own
// engine, instances, windows and bounds. The pool keeps running the
// latest revision, the latest ready one and those the traffic names or
// tags (at most traffic.MaxRevisions in all); the others drain and stop, and are
// kept retired as Knative keeps revisions (KeepMinRevisions and the other
// bounds): a later traffic block naming one runs it again, so a rollback
// is a traffic change. Tags match in any case, as DNS names do.
//
// A change that gives a revision a larger share is a warm rollout: the
// revision is first started up to the instances its new share needs, and
// the split moves once they are ready, or at the rollout timeout if each
// has at least one, and otherwise stays (SetTraffic's error wraps
// ErrNotReady); the log says, at each step, how many were needed and
// ready. A revision that takes all the traffic carries the load history
// of those it takes it from. A revision left
// without traffic drains by its requests in flight, within its request
// timeout and MaxOverMaxGrace; meanwhile the service may run beyond its
// max instances, which the log and tollgate_pool_instances_over_max
// (reason revision_change) show.
package pool
