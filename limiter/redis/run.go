package redis

// This file is the store's background work beside its pipelines: Run
// announces the node, says loudly when Redis has never answered, and
// warns once when Redis would lose every bucket in a restart.

import (
	"context"
	"strings"
	"time"
)

// Run announces this node in Redis's set of live nodes (see
// Options.Nodes) at once and then every third of Options.NodeTTL, until
// ctx ends or the store is closed; then it removes the node from the set
// and returns nil. It also says what a store cannot say on a take:
//
//   - while Redis has never answered since the store was made, an error
//     is logged at once and then every Options.LogInterval (every take is
//     decided by the failure policy, and [Store.Health] reports the store
//     not ready unless the policy is FailOpen);
//   - at its first answer, what a restart of Redis would lose (see
//     [Store.Persistence], which Health's status repeats): a warning
//     when Redis keeps no persistence (neither an append-only file nor
//     RDB snapshots: a restart refills every bucket), information
//     otherwise. A Redis that refuses CONFIG GET (a managed service, an
//     ACL) is read with INFO persistence instead.
//
// Without Run, a store decides as well, but counts no nodes: under
// FailLocal it shares a bucket among Options.Nodes nodes, or, without
// them, decides closed what Redis does not answer. Call Run once.
func (s *Store) Run(ctx context.Context) error {
	t := time.NewTicker(s.nodeTTL / 3)
	defer t.Stop()
	checked := false
	lastErrLog := time.Time{}
	for {
		err := s.announce(ctx)
		switch {
		case err == nil && !checked:
			checked = true
			s.checkPersistence(ctx)
		case err != nil && !s.contacted.Load() && ctx.Err() == nil:
			if lastErrLog.IsZero() || time.Since(lastErrLog) >= time.Duration(s.logEvery) {
				lastErrLog = time.Now()
				s.logNeverReached(err)
			}
		}
		select {
		case <-ctx.Done():
			s.leave()
			return nil
		case <-s.quit:
			return nil
		case <-t.C:
		}
	}
}

// reached records that Redis answered.
func (s *Store) reached() {
	if !s.contacted.Load() {
		s.contacted.Store(true)
	}
}

// Reached reports whether Redis has answered this store at least once.
func (s *Store) Reached() bool { return s.contacted.Load() }

// logNeverReached logs, as an error, that Redis has never answered.
func (s *Store) logNeverReached(err error) {
	readyz := "not ready until it answers"
	if s.policy == FailOpen {
		readyz = "ready (on failure: open)"
	}
	s.log.Error("redis store has never answered since start: every take is decided by the failure policy",
		"policy", s.policy.String(),
		"for", time.Since(s.epoch).Round(time.Second),
		"decisions", s.fallbackN.Load(),
		"readiness", readyz,
		"error", err)
}

// checkPersistence reads what a restart of Redis would lose (its
// append-only file and fsync policy, its RDB schedule), keeps it for
// [Store.Persistence] and Health, and logs it: a warning when Redis keeps
// neither an append-only file nor RDB snapshots, information otherwise.
// A CONFIG GET refused (renamed, forbidden by an ACL, a managed service)
// falls back to INFO persistence, which tells whether an append-only file
// is on but not its fsync policy.
func (s *Store) checkPersistence(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(s.maxWait, announceWait))
	defer cancel()
	conf, err := s.client.ConfigGet(ctx, "append*").Result()
	var save map[string]string
	if err == nil {
		save, err = s.client.ConfigGet(ctx, "save").Result()
	}
	if err == nil {
		a, okA := conf["appendonly"]
		r, okR := save["save"]
		if okA && okR {
			loses := persistenceLoss(a, conf["appendfsync"], r)
			s.persist.Store(&loses)
			if a != "yes" && r == "" {
				s.log.Warn("redis keeps no persistence (appendonly no, save \"\"): a restart of Redis refills every bucket, and the nodes admit a full burst on every key again; appendonly yes with appendfsync always loses nothing",
					"key_prefix", s.prefix)
				return
			}
			s.log.Info("redis persistence: a restart of Redis "+loses, "key_prefix", s.prefix)
			return
		}
	}
	s.log.Debug("redis store: CONFIG GET refused; reading INFO persistence", "error", err)
	info, ierr := s.client.Info(ctx, "persistence").Result()
	loses := "loses: unknown (CONFIG GET and INFO persistence refused)"
	if ierr == nil {
		switch {
		case strings.Contains(info, "aof_enabled:1"):
			loses = "loses at most what its append-only file's fsync policy allows (aof_enabled:1; appendfsync unknown: CONFIG GET refused)"
		case strings.Contains(info, "aof_enabled:0"):
			loses = "loses the takes since its last RDB snapshot, or every bucket without one (aof_enabled:0; save schedule unknown: CONFIG GET refused)"
		}
	}
	s.persist.Store(&loses)
	s.log.Info("redis persistence: a restart of Redis "+loses, "key_prefix", s.prefix)
}

// persistenceLoss says what a restart of a Redis with these settings
// loses, after "a restart of Redis ".
func persistenceLoss(appendonly, appendfsync, save string) string {
	switch {
	case appendonly == "yes" && appendfsync == "always":
		return "loses nothing (appendonly yes, appendfsync always)"
	case appendonly == "yes" && appendfsync == "everysec":
		return "loses up to 1 s of takes (appendonly yes, appendfsync everysec; always loses nothing)"
	case appendonly == "yes":
		return "loses the takes the OS had not yet written, up to about 30 s (appendonly yes, appendfsync " + appendfsync + "; always loses nothing)"
	case save != "":
		return "loses the takes since its last RDB snapshot (appendonly no, save \"" + save + "\"; appendonly yes with appendfsync always loses nothing)"
	}
	return "loses every bucket (appendonly no, save \"\")"
}

// Persistence says what a restart of Redis would lose, as Run read it
// at Redis's first answer ("" before): for a readiness probe and the
// start-up log.
func (s *Store) Persistence() string {
	if p := s.persist.Load(); p != nil {
		return *p
	}
	return ""
}
