package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/limiter"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/rls"
)

// buildRLS builds the Envoy rate limit service of `tollgate serve` and
// its listener, when --rls-config names envoy ratelimit's config
// directory; with no --rls-config it returns nils and nothing listens.
func buildRLS(f serveFlags, st quota.Store, store limiter.Limiter, log *slog.Logger, reg prometheus.Registerer) (*rls.Server, net.Listener, error) {
	if f.rlsConfig == "" {
		return nil, nil, nil
	}
	opts := rls.LoadOptions{MergeDomains: f.rlsMerge}
	if st.URL != "memory" {
		opts.MaxWindow = redisstore.MaxWindow // what the Redis script holds exactly
	}
	load := func() (*rls.Config, error) { return rls.Load(f.rlsConfig, opts) }
	cfg, err := load()
	if err != nil {
		return nil, nil, fmt.Errorf("--rls-config: %w", err)
	}
	srv := rls.New(rls.Options{
		Config:           cfg,
		Limiter:          store,
		MaxWindow:        opts.MaxWindow,
		Reload:           load,
		Logger:           log.With("component", "rls"),
		Registry:         reg,
		ResponseHeaders:  f.rlsHeaders,
		GlobalShadowMode: f.rlsShadow,
		ShutdownTimeout:  f.shutdownTimeout,
	})
	ln, err := net.Listen("tcp", f.grpcListen)
	if err != nil {
		return nil, nil, fmt.Errorf("--grpc-listen: %w", err)
	}
	log.Info("envoy rate limit service listening", "addr", ln.Addr().String(), "protocol", "grpc",
		"rls_config", f.rlsConfig, "domains", len(cfg.Domains()), "rules", len(cfg.Rules()))
	return srv, ln, nil
}

// runRLS runs srv on ln until ctx ends or the returned stop is called;
// stop returns once the server has stopped. With a nil srv it does
// nothing.
func runRLS(ctx context.Context, srv *rls.Server, ln net.Listener, log *slog.Logger) (stop func()) {
	if srv == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(ctx, ln); err != nil {
			log.Error("gRPC server stopped", "error", err)
		}
	}()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute): // Run is bounded by --shutdown-timeout; never hang the exit
		}
	}
}
