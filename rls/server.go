package rls

import (
	"context"
	"crypto/tls"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
)

// Default response header names, as envoy ratelimit's LIMIT_LIMIT_HEADER,
// LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER default them.
const (
	DefaultLimitHeader     = "RateLimit-Limit"
	DefaultRemainingHeader = "RateLimit-Remaining"
	DefaultResetHeader     = "RateLimit-Reset"
)

// DefaultNearLimitRatio is Options.NearLimitRatio when it is 0, as envoy
// ratelimit's NEAR_LIMIT_RATIO.
const DefaultNearLimitRatio = 0.8

// Bounds on one request; larger requests are answered INVALID_ARGUMENT.
const (
	MaxDescriptors = 1024 // descriptors per request
	MaxEntries     = 64   // entries per descriptor
)

// Options configure a Server. The zero value serves an empty config (every
// descriptor answered OK with no limit) from a memory store.
type Options struct {
	// Config is the rules; nil means none.
	Config *Config
	// Limiter holds the buckets; nil means a new memory store. Give
	// several servers one Redis store to share one quota between them.
	Limiter limiter.Limiter
	// MaxWindow, when positive, bounds the refill window of a limit
	// override sent in a request, as LoadOptions.MaxWindow bounds the
	// config's: a longer one is answered INVALID_ARGUMENT. Set it to
	// limiter/redis.MaxWindow with the Redis store.
	MaxWindow time.Duration
	// Reload returns the config for [Server.Reload]; nil means Reload
	// keeps the current config.
	Reload func() (*Config, error)
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the server's metrics; nil means a new registry.
	Registry prometheus.Registerer
	// ResponseHeaders adds the rate limit headers of the descriptor
	// closest to its limit to every answer, as envoy ratelimit's
	// LIMIT_RESPONSE_HEADERS_ENABLED does. Off by default.
	ResponseHeaders bool
	// LimitHeader, RemainingHeader and ResetHeader name those headers;
	// empty means DefaultLimitHeader, DefaultRemainingHeader and
	// DefaultResetHeader.
	LimitHeader, RemainingHeader, ResetHeader string
	// NearLimitRatio is the share of a limit above which hits count as
	// near_limit; 0 means DefaultNearLimitRatio.
	NearLimitRatio float32
	// Observer, when set, hears every descriptor decided against a rule
	// (the live view); nil hears nothing.
	Observer Observer
	// GlobalShadowMode answers OK to every request, after deciding and
	// counting it (envoy ratelimit's SHADOW_MODE).
	GlobalShadowMode bool
	// ShutdownTimeout bounds how long [Server.Run] waits for in-flight
	// calls once its context ends; 0 means 10 seconds.
	ShutdownTimeout time.Duration
	// TLS, when set, makes [Server.Run] serve gRPC over TLS with it (as
	// envoy ratelimit's GRPC_SERVER_USE_TLS does); gRPC adds "h2" to its
	// protocols. Its GetConfigForClient may swap certificates. nil
	// means plaintext.
	TLS *tls.Config
}

// Server answers envoy.service.ratelimit.v3.RateLimitService. It is safe
// for concurrent use; its config is swapped atomically by Reload and
// SetConfig, and every call decides under one config.
type Server struct {
	rlspb.UnimplementedRateLimitServiceServer

	limiter         limiter.Limiter
	maxWindow       time.Duration
	log             *slog.Logger
	metrics         *metrics
	headers         bool
	limitHeader     string
	remainingHeader string
	resetHeader     string
	nearRatio       float32
	globalShadow    bool
	shutdownTimeout time.Duration
	tls             *tls.Config
	reload          func() (*Config, error)
	observer        Observer // nil: none
	reloadMu        sync.Mutex
	policy          atomic.Pointer[policy]
	stopping        atomic.Bool // Run's context has ended
}

// policy is a config with the counters made for it, swapped as one.
type policy struct {
	cfg       *Config
	counters  map[*Rule]*ruleCounters
	overrides map[string]*ruleCounters // by domain
}

// New returns a server. It starts nothing; see [Server.Run].
func New(opts Options) *Server {
	s := &Server{
		limiter:         opts.Limiter,
		maxWindow:       opts.MaxWindow,
		log:             opts.Logger,
		headers:         opts.ResponseHeaders,
		limitHeader:     cmp(opts.LimitHeader, DefaultLimitHeader),
		remainingHeader: cmp(opts.RemainingHeader, DefaultRemainingHeader),
		resetHeader:     cmp(opts.ResetHeader, DefaultResetHeader),
		nearRatio:       opts.NearLimitRatio,
		globalShadow:    opts.GlobalShadowMode,
		shutdownTimeout: opts.ShutdownTimeout,
		tls:             opts.TLS,
		reload:          opts.Reload,
		observer:        opts.Observer,
	}
	if s.limiter == nil {
		s.limiter = memory.New(memory.Options{})
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.nearRatio == 0 {
		s.nearRatio = DefaultNearLimitRatio
	}
	if s.shutdownTimeout <= 0 {
		s.shutdownTimeout = 10 * time.Second
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(reg)
	s.SetConfig(opts.Config)
	if opts.Config != nil {
		s.metrics.configLoads.WithLabelValues("ok").Inc()
	}
	return s
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Config returns the config in force.
func (s *Server) Config() *Config { return s.policy.Load().cfg }

// SetConfig puts cfg in force for every call that starts after it. Bucket
// state is kept: a bucket's state means the same under any limit, so a
// changed limit applies at once without resetting anyone's quota.
func (s *Server) SetConfig(cfg *Config) {
	if cfg == nil {
		cfg = &Config{}
	}
	p := &policy{cfg: cfg, counters: map[*Rule]*ruleCounters{}, overrides: map[string]*ruleCounters{}}
	for _, r := range cfg.rules {
		p.counters[r] = s.metrics.countersFor(r.Domain, r.Key)
	}
	for d := range cfg.domains {
		p.overrides[d] = s.metrics.countersFor(d, overrideKey)
	}
	s.policy.Store(p)
}

// Reload replaces the config with the one Options.Reload returns. A config
// that fails to load is rejected, counted
// (tollgate_rls_config_loads{result="error"}) and logged, and the old one
// keeps serving.
func (s *Server) Reload() error {
	if s.reload == nil {
		return nil
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cfg, err := s.reload()
	if err != nil {
		s.metrics.configLoads.WithLabelValues("error").Inc()
		s.log.Error("envoy ratelimit config rejected; the previous config keeps serving", "error", err)
		return err
	}
	s.SetConfig(cfg)
	s.metrics.configLoads.WithLabelValues("ok").Inc()
	s.log.Info("envoy ratelimit config loaded", "domains", len(cfg.Domains()), "rules", len(cfg.Rules()))
	LogWarnings(s.log, cfg)
	return nil
}

// slot is one descriptor of a call on its way to an answer.
type slot struct {
	rule       *Rule // nil: no limit applies
	limit      bucket.Limit
	current    *rlspb.RateLimitResponse_RateLimit
	window     time.Duration
	counters   *ruleCounters
	shadow     bool
	quota      bool
	unlimited  bool
	hits       uint64
	shared     map[int]string // share_threshold patterns, for the bucket key
	overShadow bool           // over the limit, answered OK in shadow mode
	batch      int            // index in the batch; -1 when no bucket is asked
}

// ShouldRateLimit decides every descriptor of req with one
// [limiter.Limiter.TakeBatch] and answers as envoy ratelimit does; see the
// package documentation. It answers UNKNOWN for an empty domain or no
// descriptors (as envoy ratelimit does), INVALID_ARGUMENT for more than
// MaxDescriptors or an unusable limit override, and UNAVAILABLE when the store cannot decide. A descriptor without
// entries or with an entry without a key is answered OK, the others
// decided, as envoy ratelimit does (counted in
// tollgate_rls_invalid_descriptors).
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	if err := validate(req); err != nil {
		s.metrics.invalidRequests.Inc()
		return nil, err
	}
	p := s.policy.Load()
	descs := req.GetDescriptors()
	slots := make([]slot, len(descs))
	_, known := p.cfg.domains[req.GetDomain()]
	var replacing []string
	for i, d := range descs {
		sl := &slots[i]
		sl.batch = -1
		sl.hits = hitsAddend(req, d)
		if !usable(d) {
			s.metrics.invalidDescriptors.Inc()
			continue
		}
		if !known {
			s.metrics.domainNotFound.Inc()
			continue
		}
		if o := d.GetLimit(); o != nil {
			if err := s.override(sl, i, o); err != nil {
				s.metrics.invalidRequests.Inc()
				return nil, err
			}
			sl.counters = p.overrides[req.GetDomain()]
			continue
		}
		m := p.cfg.Lookup(req.GetDomain(), d.GetEntries())
		if m.Rule == nil {
			continue
		}
		r := m.Rule
		replacing = append(replacing, r.Replaces...)
		if r.Unlimited {
			sl.unlimited = true
			continue
		}
		sl.rule, sl.limit, sl.current, sl.window = r, r.limit, r.current, unitDurations[r.Unit]
		sl.counters, sl.shadow, sl.quota = p.counters[r], r.ShadowMode, r.QuotaMode
		sl.shared = m.Shared
	}
	// A rule named in another matched rule's replaces is dropped, as in
	// envoy ratelimit's constructLimitsToCheck.
	if len(replacing) > 0 {
		for i := range slots {
			if r := slots[i].rule; r != nil && r.Name != "" && slices.Contains(replacing, r.Name) {
				slots[i] = slot{batch: -1, hits: slots[i].hits}
			}
		}
	}
	return s.decide(ctx, req, slots)
}

// LogWarnings logs each of cfg's warnings, and loudly (at ERROR) a config
// without a domain: every descriptor is then answered OK, failing open.
func LogWarnings(log *slog.Logger, cfg *Config) {
	for _, w := range cfg.Warnings() {
		log.Warn("envoy ratelimit config warning", "warning", w)
	}
	if len(cfg.Domains()) == 0 {
		log.Error("envoy ratelimit config has no domain: every request is answered OK", "files", len(cfg.Files()))
	}
}
