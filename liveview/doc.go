// Package liveview records a gateway's recent throttling decisions for the
// live page at /ui and the admin API's JSON endpoints behind it.
//
// A [Recorder] keeps, in bounded memory:
//
//   - per-second aggregates of decisions (allowed, throttled, failed) per
//     service and category, for the last Options.History seconds (10
//     minutes by default), in a ring;
//   - the keys throttled most over the last Options.HotWindow seconds (one
//     minute by default), found with the Space-Saving heavy-hitters
//     algorithm (Metwally, Agrawal and El Abbadi, 2005; implemented here,
//     since no maintained Go library for it is available): one summary of
//     at most Options.HotCapacity keys per second, merged on demand.
//
// On the decision path a Recorder costs one atomic add per decision
// ([Series.Count]) and, for a throttled decision, one short critical
// section ([Recorder.Throttled]). It starts no goroutine in its constructor
// and never reads the clock except in [Recorder.Run]; [Recorder.Tick]
// takes the time as an argument, so tests drive it with a fake clock.
//
// # Lifecycle
//
//   - New(opts) makes a recorder.
//   - Series(service, category) once per category, when a config is
//     loaded; the same names return the same Series across reloads.
//   - Series.Count(allowed) or Series.Error() per decision, and
//     Throttled(key) per throttled decision, from any goroutine.
//   - Tick(now) once a second (Run(ctx) does it with the wall clock): the
//     counts since the previous tick become one point of history, the
//     current heavy-hitters summary is closed, and Options.Services (if
//     set) is sampled.
//   - Decisions(since), Hot(n) and Services(since) at any time, for the
//     JSON endpoints.
//
// With Options.Services the recorder also samples the autoscaled services
// once per tick (instances by state, recommended count, pending requests,
// 429s, last scale decisions) into a ring aligned with the decisions'.
package liveview
