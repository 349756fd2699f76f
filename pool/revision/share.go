package revision

import (
	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/runner"
)

// capacityShare is a revision's part of each instance's capacity when
// other tollgate replicas send to the same instances (Sharer, LoadSharer),
// and the GPUs the runner reports (runner.GPURunner), as last applied (reshare).
type capacityShare struct {
	sharers int // replicas sharing each instance
	share   int // this replica's max concurrency per instance (runner.LoadSharer); 0: by sharers
	gpus    int // GPUs per instance the runner reports (runner.GPURunner)
}

// shareOf is cfg with the maximum concurrency of one replica among n
// sharing each instance (see Sharer): at least one request.
func shareOf(cfg autoscale.Config, n int) autoscale.Config {
	if n <= 1 {
		return cfg
	}
	cfg.MaxConcurrency = max(1, cfg.WithDefaults().MaxConcurrency/n)
	return cfg
}

// runnerGPUs is the GPUs per instance runner reports (runner.GPURunner), in
// [0, autoscale.MaxGPUs]; 0 when it reports none.
func runnerGPUs(r runner.Runner) int {
	if g, ok := r.(runner.GPURunner); ok {
		return min(max(g.GPUs(), 0), autoscale.MaxGPUs)
	}
	return 0
}

// reshare applies the runner's current number of sharers, this replica's
// share (runner.LoadSharer) and the GPUs it reports (runner.GPURunner) to the engine;
// rv.mu is held.
func (rv *Revision) reshare() {
	gpus := runnerGPUs(rv.runner)
	s, shared := rv.runner.(runner.Sharer)
	n, share := 1, 0
	if shared {
		n = max(1, s.Sharers())
		if ls, ok := s.(runner.LoadSharer); ok {
			mc := rv.cfg.WithDefaults().MaxConcurrency
			share = min(max(ls.Share(mc), 1), mc)
		}
	}
	if n == rv.sharers && share == rv.share && gpus == rv.gpus {
		return
	}
	prevN, prevShare, prevGPUs := rv.sharers, rv.share, rv.gpus
	rv.sharers, rv.share, rv.gpus = n, share, gpus
	if err := rv.eng.SetConfigShared(rv.engineConfig()); err != nil {
		rv.sharers, rv.share, rv.gpus = prevN, prevShare, prevGPUs
		rv.log.Warn("cannot apply the capacity share", "sharers", n, "share", share, "gpus", gpus, "error", err)
		return
	}
	switch {
	case gpus != prevGPUs && gpus > 0:
		rv.log.Info("the runner's instances have GPUs: idle instances are kept 10 minutes at most", "gpus", gpus,
			"idle_timeout", rv.eng.Config().IdleTimeout)
	case gpus != prevGPUs:
		rv.log.Info("the runner's instances no longer have GPUs", "idle_timeout", rv.eng.Config().IdleTimeout)
	}
	if n == prevN {
		// A share that follows the replicas' load changes often: only
		// a change of the replicas is worth a line.
		rv.log.Debug("capacity share", "sharers", n, "max_concurrency_here", rv.eng.Config().MaxConcurrency)
		return
	}
	rv.log.Info("instances shared with other tollgate replicas", "sharers", n, "from", prevN,
		"max_concurrency_here", rv.eng.Config().MaxConcurrency)
	if mc := rv.cfg.WithDefaults().MaxConcurrency; mc < n {
		rv.log.Warn("max_concurrency is below the number of tollgate replicas: each replica sends an instance one request at once, so an instance may get up to one per replica",
			"max_concurrency", mc, "replicas", n)
	}
	rv.m.sharers.Set(float64(n))
}
