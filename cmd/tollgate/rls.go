package main

import (
	"fmt"
	"log/slog"
	"net"

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
