package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/rls"
)

// Run serves until ctx ends or a part fails, then shuts down in two
// phases:
//
//  1. drain: /readyz answers 503 while requests are still served for
//     Options.DrainDelay, so load balancers stop sending traffic;
//  2. stop: the listener closes, in-flight requests get up to
//     Options.ShutdownTimeout to finish, then the background work (the
//     sweeper, the Envoy rate limit service, the live view, the pools)
//     stops.
//
// Every goroutine (reload worker, certificate watchers, Redis store,
// sweeper, HTTP server, rate limit service, live view, pools, shutdown)
// runs in one errgroup; Run returns once all have stopped, with the first
// error, and closes the node.
// Reloads run in their own worker (see TriggerReload), and shutdown ends
// a config read in progress, so a reload that hangs cannot delay
// shutdown. Run may be called once.
func (n *Node) Run(ctx context.Context) error {
	defer n.Close()
	grp, failed := errgroup.WithContext(ctx)
	background, stopBackground := context.WithCancel(context.Background())
	defer stopBackground()
	served := make(chan struct{}) // closed when the HTTP server has returned

	grp.Go(func() error { // reload worker
		for {
			select {
			case <-failed.Done():
				return nil
			case <-n.reloads:
				n.Reload(n.stopping) // logs and counts its own outcome; a bad file keeps the old state
			}
		}
	})
	grp.Go(func() error { return n.quotas.Run(background) }) // follows other nodes' quota approvals
	if n.rls != nil && n.opts.RLS.Watch {
		grp.Go(func() error { // the rls config directory's changes queue the same reload as SIGHUP
			return rls.Watch(failed, n.rlsDir, rls.WatchOptions{Logger: n.log, Loaded: n.rls.Config().Digest()}, func() {
				if n.TriggerReload() {
					n.log.Info("rls config directory changed: reloading config")
				}
			})
		})
	}
	for _, c := range n.certs.all() { // certificate files re-read when they change, until the background work stops
		grp.Go(func() error { return c.Run(background) })
	}
	if n.creds != nil { // the credentials file re-read when it changes
		grp.Go(func() error { return n.creds.run(background) })
	}
	if n.redis != nil {
		grp.Go(func() error { // the Redis store: this node's announcements, and errors while Redis has never answered
			return n.redis.Run(background)
		})
	}
	if n.sweep != nil {
		grp.Go(func() error {
			sweepEvery(background, n.sweep, 10*time.Second)
			return nil
		})
		if path := n.opts.BucketCheckpoint; path != "" {
			grp.Go(func() error { // the buckets in debt, to a file: every CheckpointEvery, and once the last request is served
				return checkpointEvery(background, n.sweep, path, CheckpointEvery, n.log)
			})
		}
	}
	if n.rls != nil {
		grp.Go(func() error { // Envoy rate limit service (gRPC), stopped with the background work
			if err := n.rls.Run(background, n.rlsLn); err != nil {
				return fmt.Errorf("envoy rate limit service: %w", err)
			}
			return nil
		})
	}
	grp.Go(func() error { // live view: per-second aggregates until the background work stops
		return n.live.Run(background)
	})
	grp.Go(func() error { // autoscaled services: stopped, every instance within its grace, after the server drained
		if err := n.pools.Run(background); err != nil {
			return fmt.Errorf("autoscaled services: %w", err)
		}
		return nil
	})
	grp.Go(func() error { // HTTP server
		defer close(served)
		serve := n.srv.Serve
		if n.srv.TLSConfig != nil {
			serve = func(ln net.Listener) error { return n.srv.ServeTLS(ln, "", "") } // the certificate is the TLSConfig's
		}
		if err := serve(n.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving: %w", err)
		}
		return nil
	})
	grp.Go(func() error { // two-phase shutdown
		defer func() {
			n.kube.Close() // first: Deployments keep their pods for the next tollgate
			stopBackground()
		}()
		<-failed.Done()
		n.startShutdown() // ends a config read in progress
		if n.opts.OnShutdown != nil {
			n.opts.OnShutdown()
		}
		// Phase 1: drain.
		n.gw.SetReady(false)
		if d := n.opts.DrainDelay; d > 0 {
			n.log.Info("draining: /readyz answers 503", "delay", d)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-served: // nothing left to drain
			}
			t.Stop()
		}
		// Phase 2: stop.
		timeout := n.opts.ShutdownTimeout
		n.log.Info("shutting down: finishing in-flight requests", "timeout", timeout)
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := n.srv.Shutdown(sctx); err != nil {
			n.srv.Close()
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("in-flight requests still running after %v; closed them", timeout)
			}
			return err
		}
		return nil
	})
	err := grp.Wait()
	if err == nil {
		n.log.Info("stopped")
	}
	return err
}

// CheckpointEvery is how often a node writes its memory store's buckets in
// debt to Options.BucketCheckpoint. A graceful stop writes them after the
// last request; a crash forgets the takes since the last write (at most
// this interval's worth: what the buckets held at that write plus this
// interval's refill).
const CheckpointEvery = 5 * time.Second

// checkpointEvery writes s's buckets in debt to path every period and
// once more when ctx ends; a failed periodic write is logged (the next
// may succeed), a failed last one is returned.
func checkpointEvery(ctx context.Context, s *memory.Store, path string, period time.Duration, log *slog.Logger) error {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			n, err := s.SaveCheckpoint(path)
			if err != nil {
				return err
			}
			log.Info("bucket checkpoint written", "file", path, "buckets_in_debt", n)
			return nil
		case <-t.C:
			if _, err := s.SaveCheckpoint(path); err != nil {
				log.Warn("bucket checkpoint not written; retrying in "+period.String(), "error", err)
			}
		}
	}
}

// sweepEvery makes the memory store forget refilled buckets every period,
// so memory (and tollgate_buckets_tracked) falls after a burst of keys even
// when no new key arrives to trigger a sweep.
func sweepEvery(ctx context.Context, s *memory.Store, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sweep()
		}
	}
}
