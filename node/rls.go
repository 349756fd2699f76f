package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http/httpguts"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/tlsfiles"
	"github.com/tollgate/tollgate/limiter"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/rls"
)

// DefaultGRPCListen is where the Envoy rate limit service listens when
// neither --grpc-listen nor the config's rls.grpc_listen says: envoy
// ratelimit's GRPC_PORT, on loopback.
const DefaultGRPCListen = "127.0.0.1:8081"

// RLSOptions override the config file's rls section; each field that is
// set wins. The zero value overrides nothing.
type RLSOptions struct {
	// ConfigDir is envoy ratelimit's config directory (tollgate serve
	// --rls-config).
	ConfigDir string
	// GRPCListen is the gRPC listen address; with neither this nor the
	// file's, DefaultGRPCListen.
	GRPCListen string
	// TLS, when set, replaces the file's rls.tls as a whole: the gRPC
	// listener's certificate, key and, for mutual TLS, client CA files,
	// re-read when they change.
	TLS config.TLS
	// MergeDomains, ShadowMode and ResponseHeaders, when non-nil, replace
	// the file's merge_domains, shadow_mode and response_headers.
	MergeDomains, ShadowMode, ResponseHeaders *bool
	// LimitHeader, RemainingHeader and ResetHeader name the rate limit
	// headers.
	LimitHeader, RemainingHeader, ResetHeader string
	// RequireDomain refuses a config directory (at start and on reload)
	// that defines no domain; without it such a config is logged at
	// ERROR and answers OK to everything.
	RequireDomain bool
	// Watch reloads when a file of the config directory changes
	// (rls.Watch: fsnotify, debounced), through the node's reload queue,
	// as SIGHUP does.
	Watch bool
}

// or returns *b if b is set, else def.
func or(b *bool, def bool) bool {
	if b != nil {
		return *b
	}
	return def
}

// rlsSettings merges the rls flags over the config file's rls section:
// each flag given wins over the file.
func rlsSettings(over RLSOptions, file config.RLS) config.RLS {
	st := file
	if over.ConfigDir != "" {
		st.ConfigDir = over.ConfigDir
	}
	if over.GRPCListen != "" {
		st.GRPCListen = over.GRPCListen
	}
	if st.GRPCListen == "" {
		st.GRPCListen = DefaultGRPCListen
	}
	if !over.TLS.IsZero() {
		st.TLS = over.TLS
	}
	st.MergeDomains = or(over.MergeDomains, st.MergeDomains)
	st.ShadowMode = or(over.ShadowMode, st.ShadowMode)
	st.ResponseHeaders = or(over.ResponseHeaders, st.ResponseHeaders)
	for i, dst := range []*string{&st.LimitHeader, &st.RemainingHeader, &st.ResetHeader} {
		if h := over.headers()[i]; h != "" {
			*dst = h
		}
	}
	return st
}

// headers returns the header overrides: limit, remaining, reset.
func (o RLSOptions) headers() [3]string {
	return [3]string{o.LimitHeader, o.RemainingHeader, o.ResetHeader}
}

// rlsPlan is the Envoy rate limit service of `tollgate serve` as read
// from its config directory and TLS files, before the store is open: a
// broken directory is refused before tollgate dials Redis.
type rlsPlan struct {
	set       config.RLS
	cfg       *rls.Config
	load      func() (*rls.Config, error)
	maxWindow time.Duration
	certs     *tlsfiles.Certs
	tlsConfig *tls.Config
}

// planRLS reads the Envoy rate limit service's config directory and TLS
// files, when --rls-config or the config's rls.config_dir names envoy
// ratelimit's config directory; with neither it returns nil. configName
// names the config file in errors.
func planRLS(ctx context.Context, over RLSOptions, file config.RLS, configName string, st config.Store, log *slog.Logger) (*rlsPlan, error) {
	set := rlsSettings(over, file)
	if set.ConfigDir == "" {
		if !set.TLS.IsZero() {
			return nil, errors.New("gRPC TLS files are given (--grpc-tls-cert or the config's rls.tls), but no rls config directory, so there is no gRPC listener: give --rls-config or rls.config_dir")
		}
		return nil, nil
	}
	source := "--rls-config"
	if over.ConfigDir == "" {
		source = configName + ": rls.config_dir"
	}
	for i, name := range []string{"--rls-limit-header", "--rls-remaining-header", "--rls-reset-header"} {
		if h := over.headers()[i]; h != "" && !httpguts.ValidHeaderFieldName(h) {
			return nil, fmt.Errorf("%s %q is not a valid HTTP header name", name, h)
		}
	}
	opts := rls.LoadOptions{MergeDomains: set.MergeDomains}
	if st.URL != "memory" {
		opts.MaxWindow = redisstore.MaxWindow // what the Redis script holds exactly
	}
	p := &rlsPlan{set: set, maxWindow: opts.MaxWindow}
	p.load = func() (*rls.Config, error) {
		cfg, err := rls.LoadContext(ctx, set.ConfigDir, opts)
		if err == nil && over.RequireDomain && len(cfg.Domains()) == 0 {
			err = fmt.Errorf("%s: no domain loaded from %d files (--rls-require-domain)", set.ConfigDir, len(cfg.Files()))
		}
		return cfg, err
	}
	var err error
	if p.cfg, err = p.load(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	tlsAt := tlsSource{"--grpc-tls-cert", "--grpc-tls-key", "--grpc-tls-client-ca"}
	if over.TLS.IsZero() {
		tlsAt = tlsFields(configName, "rls.tls", "client_ca_file")
	}
	if p.certs, p.tlsConfig, err = loadListenerCerts(set.TLS, "gRPC listener", tlsAt, nil, log); err != nil { // gRPC adds h2
		return nil, err
	}
	return p, nil
}

// certsOrNil returns the gRPC listener's certificates, for the node to
// watch; nil without TLS files or without a plan.
func (p *rlsPlan) certsOrNil() *tlsfiles.Certs {
	if p == nil {
		return nil
	}
	return p.certs
}

// start builds the service on store and its listener; a nil plan starts
// nothing and returns nils.
func (p *rlsPlan) start(store limiter.Limiter, observer rls.Observer, shutdownTimeout time.Duration, log *slog.Logger, reg prometheus.Registerer) (*rls.Server, net.Listener, error) {
	if p == nil {
		return nil, nil, nil
	}
	set, cfg := p.set, p.cfg
	rls.LogWarnings(log.With("component", "rls"), cfg)
	srv := rls.New(rls.Options{
		Observer:         observer,
		Config:           cfg,
		Limiter:          store,
		MaxWindow:        p.maxWindow,
		Reload:           p.load,
		Logger:           log.With("component", "rls"),
		Registry:         reg,
		ResponseHeaders:  set.ResponseHeaders,
		LimitHeader:      set.LimitHeader,
		RemainingHeader:  set.RemainingHeader,
		ResetHeader:      set.ResetHeader,
		GlobalShadowMode: set.ShadowMode,
		ShutdownTimeout:  shutdownTimeout,
		TLS:              p.tlsConfig,
	})
	ln, err := net.Listen("tcp", set.GRPCListen)
	if err != nil {
		return nil, nil, fmt.Errorf("--grpc-listen: %w", err)
	}
	log.Info("envoy rate limit service listening", "addr", ln.Addr().String(), "protocol", "grpc", "tls", tlsMode(set.TLS),
		"rls_config", set.ConfigDir, "domains", len(cfg.Domains()), "rules", len(cfg.Rules()),
		"shadow_mode", set.ShadowMode, "response_headers", set.ResponseHeaders)
	return srv, ln, nil
}

// rlsRoutes are envoy ratelimit's HTTP endpoints (/json, GET
// /healthcheck) on tollgate's HTTP listener, when the Envoy rate limit
// service runs.
func rlsRoutes(srv *rls.Server) map[string]http.Handler {
	if srv == nil {
		return nil
	}
	h := srv.HTTPHandler()
	return map[string]http.Handler{"POST /json": h, "/json": h, "GET /healthcheck": h}
}
