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
//     at most Options.HotCapacity keys per second, merged on demand;
//   - the utilisation of the last Options.UsageWindow minutes (an hour by
//     default), per bucket: for each minute the Options.UsageCapacity
//     buckets throttled most (Space-Saving, from the same buffers) and the
//     Options.UsageCapacity buckets used most (an exact top-k by peak: a
//     bucket enters a full table only by peaking above its least-used
//     bucket, so a flood of accounts that each use a little never pushes
//     out a tenant close to its limit), fed by [Recorder.Used] for every
//     allowed decision ([Recorder.Usage]).
//
// On the decision path a Recorder costs one atomic add per decision
// ([Series.Count]) and, for a throttled decision, a copy of the key into
// one of a few fixed buffers (64 KiB each; as many as CPUs rounded up to
// a power of two, at most 32) under that buffer's lock
// ([Recorder.Throttled]). The Space-Saving work happens off
// the decision path: [Recorder.Run] folds the buffers into the current
// summary whenever one is half full, and [Recorder.Tick] folds what is left
// before closing the second. A throttle that finds its buffer full is
// dropped and counted ([Recorder.Dropped]); [Recorder.Hot] reports a
// window's drops and widens its estimates by them, so the reported ranges
// still hold the true counts. It starts no goroutine in its constructor
// and never reads the clock except in [Recorder.Run]; [Recorder.Tick]
// takes the time as an argument, so tests drive it with a fake clock.
//
// # Lifecycle
//
//   - New(opts) makes a recorder.
//   - Series(service, category) once per category, when a config is
//     loaded; the same names return the same Series across reloads.
//   - Series.Count(allowed) or Series.Error() per decision,
//     Throttled(key) per throttled decision and Used(key, used, capacity)
//     per allowed one, from any goroutine.
//   - Run(ctx) for the recorder's life: it ticks once a second with the
//     wall clock and folds buffered throttles in between; its caller owns
//     its goroutine and stops it with ctx.
//   - Tick(now) once a second (Run does it): the counts since the previous
//     tick become one point of history, the buffered throttles are folded
//     and the current heavy-hitters summary is closed, and
//     Options.Services (if set) is sampled.
//   - Decisions(since), Hot(n), Services(since) and Usage(n, match) at
//     any time, for the JSON endpoints. A minute is closed by the first
//     tick in a later minute.
//
// With Options.Services the recorder also samples the autoscaled services
// once per tick (instances by state, recommended count, pending requests,
// 429s, last scale decisions) into a ring aligned with the decisions'.
package liveview
