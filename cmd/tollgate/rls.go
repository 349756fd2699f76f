package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http/httpguts"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/limiter"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/rls"
)

// defaultGRPCListen is where the Envoy rate limit service listens when
// neither --grpc-listen nor the config's rls.grpc_listen says: envoy
// ratelimit's GRPC_PORT, on loopback.
const defaultGRPCListen = "127.0.0.1:8081"

// optBool is a boolean flag that remembers whether it was given, so that
// a flag left out defers to the config file and a flag given wins over it.
type optBool struct{ set, v bool }

func (b *optBool) String() string { return strconv.FormatBool(b.v) }

// Set parses the flag's value, as flag.Bool does.
func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.v = true, v
	return nil
}

// IsBoolFlag lets the flag stand alone (--rls-shadow-mode).
func (b *optBool) IsBoolFlag() bool { return true }

// or returns the flag's value if it was given, else def.
func (b optBool) or(def bool) bool {
	if b.set {
		return b.v
	}
	return def
}

// rlsSettings merges the rls flags over the config file's rls section:
// each flag given wins over the file.
func rlsSettings(f serveFlags, file config.RLS) config.RLS {
	st := file
	if f.rlsConfig != "" {
		st.ConfigDir = f.rlsConfig
	}
	if f.grpcListen != "" {
		st.GRPCListen = f.grpcListen
	}
	if st.GRPCListen == "" {
		st.GRPCListen = defaultGRPCListen
	}
	st.MergeDomains = f.rlsMerge.or(st.MergeDomains)
	st.ShadowMode = f.rlsShadow.or(st.ShadowMode)
	st.ResponseHeaders = f.rlsHeaders.or(st.ResponseHeaders)
	for i, dst := range []*string{&st.LimitHeader, &st.RemainingHeader, &st.ResetHeader} {
		if f.rlsHeaderNames[i] != "" {
			*dst = f.rlsHeaderNames[i]
		}
	}
	return st
}

// buildRLS builds the Envoy rate limit service of `tollgate serve` and
// its listener, when --rls-config or the config's rls.config_dir names
// envoy ratelimit's config directory; with neither it returns nils and
// nothing listens. configName names the config file in errors; ctx
// bounds the reads of the config directory, at start and on reload.
func buildRLS(ctx context.Context, f serveFlags, file config.RLS, configName string, st config.Store, store limiter.Limiter, log *slog.Logger, reg prometheus.Registerer) (*rls.Server, net.Listener, error) {
	set := rlsSettings(f, file)
	if set.ConfigDir == "" {
		return nil, nil, nil
	}
	source := "--rls-config"
	if f.rlsConfig == "" {
		source = configName + ": rls.config_dir"
	}
	for i, name := range []string{"--rls-limit-header", "--rls-remaining-header", "--rls-reset-header"} {
		if h := f.rlsHeaderNames[i]; h != "" && !httpguts.ValidHeaderFieldName(h) {
			return nil, nil, fmt.Errorf("%s %q is not a valid HTTP header name", name, h)
		}
	}
	opts := rls.LoadOptions{MergeDomains: set.MergeDomains}
	if st.URL != "memory" {
		opts.MaxWindow = redisstore.MaxWindow // what the Redis script holds exactly
	}
	load := func() (*rls.Config, error) { return rls.LoadContext(ctx, set.ConfigDir, opts) }
	cfg, err := load()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", source, err)
	}
	srv := rls.New(rls.Options{
		Config:           cfg,
		Limiter:          store,
		MaxWindow:        opts.MaxWindow,
		Reload:           load,
		Logger:           log.With("component", "rls"),
		Registry:         reg,
		ResponseHeaders:  set.ResponseHeaders,
		LimitHeader:      set.LimitHeader,
		RemainingHeader:  set.RemainingHeader,
		ResetHeader:      set.ResetHeader,
		GlobalShadowMode: set.ShadowMode,
		ShutdownTimeout:  f.shutdownTimeout,
	})
	ln, err := net.Listen("tcp", set.GRPCListen)
	if err != nil {
		return nil, nil, fmt.Errorf("--grpc-listen: %w", err)
	}
	log.Info("envoy rate limit service listening", "addr", ln.Addr().String(), "protocol", "grpc",
		"rls_config", set.ConfigDir, "domains", len(cfg.Domains()), "rules", len(cfg.Rules()),
		"shadow_mode", set.ShadowMode, "response_headers", set.ResponseHeaders)
	return srv, ln, nil
}
