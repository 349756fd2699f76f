// Package gateway is tollgate's HTTP front door. It identifies the account,
// region and action of each request, takes a token from the right bucket,
// and answers in the caller's error dialect:
//
//   - at "/", the AWS JSON 1.1 protocol (POST, X-Amz-Target, SigV4
//     Authorization): throttled requests get exactly what ECS or Cloud Map
//     send (HTTP 400, ThrottlingException or RequestLimitExceeded), allowed
//     ones are proxied to the service's upstream or answered with {};
//   - at "/v1/take" and "/v1/take/batch", a native JSON decision API for
//     services that ask tollgate before doing work (HTTP 429, Retry-After
//     and the IETF RateLimit header fields);
//   - at "/v1/admin/…", bucket inspection and config reload behind a bearer
//     token;
//   - "/healthz", "/readyz" and "/metrics" for operations.
//
// Identity comes from the SigV4 credential scope; signatures are not
// verified (tollgate sits behind, or in front of, whatever authenticates).
package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/quota"
)

// DefaultMaxBodyBytes is the largest request body accepted when
// Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// DefaultMaxBatch is the most takes one batch request may hold when
// Options.MaxBatch is 0: 1,000, as gubernator allows.
const DefaultMaxBatch = 1000

// DefaultMaxInFlightBytes is the bound on request bytes being served at
// once when Options.MaxInFlightBytes is 0: 32 MiB.
const DefaultMaxInFlightBytes = 32 << 20

// batchItemCost is what one take of a batch counts against the in-flight
// bound on top of the body: its share of the decoder's, the resolver's and
// the answer's working memory (about 600 bytes measured), rounded up.
const batchItemCost = 640

// Options configure a Gateway. The zero value serves the built-in ecs and
// cloudmap presets from an in-memory store.
type Options struct {
	// Config is the throttling policy; nil means quota.Default().
	Config *quota.Config
	// Limiter holds the buckets; nil means a new memory store.
	Limiter limiter.Limiter
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the gateway's metrics and is served at /metrics;
	// nil means a new registry.
	Registry *prometheus.Registry
	// AdminToken guards /v1/admin/; empty disables the admin endpoints
	// (they answer 404).
	AdminToken string
	// Reload returns a new config for [Gateway.Reload] (and
	// /v1/admin/reload without AdminReload); nil means reload keeps the
	// current config.
	Reload func() (*quota.Config, error)
	// AdminReload, when set, is what POST /v1/admin/reload runs in place
	// of [Gateway.Reload]: a reload of everything the server loaded from
	// files (package node's Reload), which calls Gateway.Reload for the
	// config. It returns the names of the parts it reloaded and the
	// errors of those that kept their old state.
	AdminReload func(ctx context.Context) (reloaded []string, err error)
	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBatch bounds the takes in one POST /v1/take/batch; a larger batch
	// is answered 400 naming the limit, before any take. 0 means
	// DefaultMaxBatch.
	MaxBatch int
	// MaxInFlightBytes bounds the memory that requests being served may
	// hold at once. A request counts its body as the bytes arrive (in
	// steps that double from 4 KiB, so never more than about twice what
	// it sent) and a batch 640 bytes more per take. A request whose next
	// bytes would go over the bound is answered at once with 503 and
	// Retry-After: 1, never queued. The bound is shared: a request
	// nobody vouches for yet counts against its client address's share
	// (an eighth of the bound, at least MaxBodyBytes) and may not use the
	// last quarter, which with a Verifier is kept for clients whose key
	// verified from their address lately (they count against their key's
	// share instead). 0 means DefaultMaxInFlightBytes; negative means no
	// bound.
	MaxInFlightBytes int64
	// BodyIdleTimeout, BodyMinRate and BodyTimeout cut a request body
	// that stops arriving (as nginx's client_body_timeout and Apache's
	// mod_reqtimeout do): no gap between two reads may pass
	// BodyIdleTimeout, after the first BodyIdleTimeout the body must
	// have arrived at BodyMinRate bytes a second on average, and all of
	// it within BodyTimeout. A body cut is answered 408 and its
	// connection closed. 0 means DefaultBodyIdleTimeout (5 s),
	// DefaultBodyMinRate (1 KiB/s) and DefaultBodyTimeout (30 s).
	BodyIdleTimeout time.Duration
	BodyMinRate     float64
	BodyTimeout     time.Duration
	// FailureDelay is how long, with a Verifier, a request refused from
	// its headers (its signature missing, malformed or wrong, its key
	// unknown or refused for its failures, its verification shed by the
	// budget) waits before its answer, to half as long again at random,
	// on a connection then closed, as PostgreSQL's auth_delay and sshd's
	// failure delay make a failing client wait: one that reconnects at
	// once after each refusal then comes back at most once a FailureDelay
	// per connection, so a crowd of them costs the server a trickle of
	// connections, not a flood. A key that has spent its failures from the
	// address or across addresses waits four times as long. At most
	// MaxDelayed requests wait at once; past that they are answered at
	// once. 0 means DefaultFailureDelay (1 s); negative means none.
	FailureDelay time.Duration
	// AdminFailures bounds wrong admin tokens per client address: a burst
	// of AdminFailures.Burst, refilled at AdminFailures.Rate a second;
	// past it an address is answered 429 without its token being
	// compared. The zero value takes DefaultAdminFailureBurst and
	// DefaultAdminFailureRate.
	AdminFailures AdminFailureOptions
	// Handlers are in-process upstreams by service name: an allowed AWS
	// JSON request of such a service is answered by its handler (the
	// cloudmap service by package cloudmap's registry, say), with
	// [HeaderAccount] set to the account it was throttled as. An
	// upstream URL in the config wins over a handler. Handlers outlive
	// config reloads.
	Handlers map[string]http.Handler
	// Live records decisions for /ui and /v1/admin/live/; nil turns the
	// live view off. The caller runs it (Recorder.Run).
	Live *liveview.Recorder
	// Pools returns the handler of a service's autoscaled pool (see
	// package pool): the upstream of a service with an autoscale section,
	// and what its route leads to. Nil: such services are answered
	// locally and their routes are not served.
	Pools func(service string) http.Handler
	// Limits, when set, has the last word on every decision's limit: it
	// gets the bucket's key and the config's limit and returns the limit
	// to take from (an approved Service Quotas increase, package
	// servicequotas). It is called on every take, so it must be fast.
	Limits Limits
	// AdminHandlers are more admin endpoints by mux pattern (such as
	// "GET /v1/admin/pools"), behind the admin token like the others. A
	// handler with a Help() string method gives GET /v1/admin/ its line
	// of help (see [Helper]).
	AdminHandlers map[string]http.Handler
	// Routes are more public endpoints by mux pattern (such as envoy
	// ratelimit's "POST /json"), without the admin token.
	Routes map[string]http.Handler
	// Verifier, when set, verifies the Signature Version 4 of every AWS
	// JSON request before anything else is done with it: a request that
	// fails is answered with AWS's error (UnrecognizedClientException,
	// InvalidSignatureException, …) and takes no token. Nil trusts the
	// access key id a request claims.
	Verifier *awsjson.Verifier
}

// Helper is an admin handler that says what it does, in one line, for
// the index at GET /v1/admin/.
type Helper interface {
	http.Handler
	Help() string
}

// Limits adjusts the config's limit of a bucket (see Options.Limits).
type Limits interface {
	Limit(k quota.Key, l bucket.Limit) bucket.Limit
}

// HeaderAccount is the request header in which the gateway tells an
// in-process handler (Options.Handlers) the account a request belongs to;
// any value the client sent is replaced. It is [awsjson.HeaderAccount].
const HeaderAccount = awsjson.HeaderAccount

// Gateway is an http.Handler serving every tollgate endpoint. It is safe
// for concurrent use; its config can be swapped atomically with Reload.
type Gateway struct {
	limiter     limiter.Limiter
	limits      Limits // nil: the config's limits as they are
	log         *slog.Logger
	adminOn     bool // a token is configured
	adminDigest [32]byte
	reload      func() (*quota.Config, error)
	adminReload func(ctx context.Context) ([]string, error)
	reloadMu    sync.Mutex // one reload at a time, so the newest file wins
	maxBody     int64
	maxBatch    int
	inFlight    *inFlight
	bodyIdle    time.Duration
	bodyMinRate float64
	bodyTimeout time.Duration
	// failureDelay and delayed: see Options.FailureDelay.
	failureDelay time.Duration
	delayed      chan struct{}
	adminFails   *adminFailures
	policy       atomic.Pointer[policy]
	ready        atomic.Bool
	metrics      *metrics
	mux          *http.ServeMux
	routes       map[string]*routeMetrics // by mux pattern
	handlers     map[string]http.Handler  // by service name
	live         *liveview.Recorder       // nil: no live view
	adminMore    []adminEndpoint          // Options.AdminHandlers, for GET /v1/admin/
	pools        func(service string) http.Handler
	poolMetrics  *routeMetrics
	verifier     *awsjson.Verifier // nil: identities as claimed
	names        accountNames      // 12-digit account ids back to the accounts buckets are named by
}

// policy is a config with what the gateway derives from it, swapped as one.
type policy struct {
	cfg      *quota.Config
	proxies  map[string]*httputil.ReverseProxy // by service name
	counters map[*quota.Category]*decisionCounters
	pools    map[string]http.Handler // autoscaled upstreams by service name
	routes   []poolRoute             // most specific first
}

// enableRandPool turns the pool on once: uuid.EnableRandPool writes a
// package variable that every uuid.NewString reads, so a second gateway
// made while one serves (a test's, or any in-process caller's) raced with
// its request ids (go test -race, gateway tests in parallel).
var enableRandPool = sync.OnceFunc(uuid.EnableRandPool)

// New returns a gateway. It fails only if an upstream URL in the config
// cannot be used.
//
// New turns on github.com/google/uuid's random pool (uuid.EnableRandPool)
// for the process, so that a request id costs no system call; the ids stay
// random version-4 UUIDs.
func New(opts Options) (*Gateway, error) {
	g := &Gateway{
		limiter:     opts.Limiter,
		log:         opts.Logger,
		adminOn:     opts.AdminToken != "",
		adminDigest: sha256.Sum256([]byte(opts.AdminToken)),
		reload:      opts.Reload,
		adminReload: opts.AdminReload,
		maxBody:     opts.MaxBodyBytes,
		maxBatch:    opts.MaxBatch,
		bodyIdle:    opts.BodyIdleTimeout,
		bodyMinRate: opts.BodyMinRate,
		bodyTimeout: opts.BodyTimeout,
		adminFails:  newAdminFailures(opts.AdminFailures),
		handlers:    opts.Handlers,
		limits:      opts.Limits,
		live:        opts.Live,
		pools:       opts.Pools,
		verifier:    opts.Verifier,
	}
	if g.maxBatch <= 0 {
		g.maxBatch = DefaultMaxBatch
	}
	if g.bodyIdle <= 0 {
		g.bodyIdle = DefaultBodyIdleTimeout
	}
	if g.bodyMinRate <= 0 {
		g.bodyMinRate = DefaultBodyMinRate
	}
	g.failureDelay, g.delayed = opts.FailureDelay, make(chan struct{}, MaxDelayed)
	if g.failureDelay == 0 {
		g.failureDelay = DefaultFailureDelay
	}
	if g.bodyTimeout <= 0 {
		g.bodyTimeout = DefaultBodyTimeout
	}
	if g.limiter == nil {
		g.limiter = memory.New(memory.Options{})
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.maxBody <= 0 {
		g.maxBody = DefaultMaxBodyBytes
	}
	maxInFlight := opts.MaxInFlightBytes
	if maxInFlight == 0 {
		maxInFlight = DefaultMaxInFlightBytes
	}
	g.inFlight = newInFlight(maxInFlight, g.maxBody)
	if g.verifier == nil {
		g.inFlight.reserve = 0 // nobody is proven: the whole bound is open
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	g.metrics = newMetrics(reg, g.limiter, g.live)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_in_flight_bytes",
		Help: "Request bytes counted against --max-in-flight-bytes now (bodies as they arrive, plus 640 per batch take).",
	}, func() float64 { return float64(g.inFlight.n.Load()) }))
	cfg := opts.Config
	if cfg == nil {
		cfg = quota.Default()
	}
	if err := g.setConfig(cfg); err != nil {
		return nil, err
	}
	g.ready.Store(true)
	enableRandPool()

	mux := http.NewServeMux()
	g.routes = map[string]*routeMetrics{}
	handle := func(pattern, name string, h http.HandlerFunc) {
		mux.Handle(pattern, h)
		g.routes[pattern] = g.metrics.route(name)
	}
	handle("/", "aws", g.serveAWS)
	handle("POST /v1/take", "take", g.serveTake)
	handle("POST /v1/take/batch", "take_batch", g.serveBatch)
	handle("/v1/take", "take", methodNotAllowed("POST"))
	handle("/v1/take/batch", "take_batch", methodNotAllowed("POST"))
	handle("GET /v1/admin/bucket", "admin_bucket", g.admin(g.serveBucket))
	handle("POST /v1/admin/reload", "admin_reload", g.admin(g.serveReload))
	handle("/v1/admin/", "admin", g.admin(func(w http.ResponseWriter, r *http.Request) {
		writeNativeError(w, http.StatusNotFound, "", "no admin endpoint "+r.Method+" "+r.URL.Path)
	}))
	g.handleLive(handle)
	handle("GET /healthz", "healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	handle("GET /readyz", "readyz", g.serveReady)
	handle("GET /metrics", "metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}).ServeHTTP)
	for pattern, h := range opts.AdminHandlers {
		handle(pattern, "admin", g.admin(h.ServeHTTP))
		help := "added by the process (Options.AdminHandlers)"
		if hh, ok := h.(Helper); ok {
			help = hh.Help()
		}
		g.adminMore = append(g.adminMore, adminEndpoint{pattern, help})
	}
	slices.SortFunc(g.adminMore, func(a, b adminEndpoint) int { return strings.Compare(a.Path, b.Path) })
	for pattern, h := range opts.Routes {
		handle(pattern, "route", h.ServeHTTP)
	}
	g.poolMetrics = g.metrics.route("pool")
	g.mux = mux
	return g, nil
}

// ServeHTTP implements http.Handler. Every response carries a request id
// in X-Amzn-Requestid; at debug level every request is logged with it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := awsjson.NewRequestID()
	w.Header()[awsjson.HeaderRequestID] = []string{id}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	var rm *routeMetrics
	if h, r2 := g.policy.Load().matchRoute(r); h != nil {
		h.ServeHTTP(rec, r2)
		rm = g.poolMetrics
	} else {
		h, pattern := g.mux.Handler(r)
		h.ServeHTTP(rec, r)
		rm = g.routes[pattern]
	}
	elapsed := time.Since(start)
	if rm != nil {
		rm.observe(r.Method, rec.status, elapsed)
	}
	if g.log.Enabled(r.Context(), slog.LevelDebug) {
		g.log.Debug("request", "request_id", id, "method", r.Method, "path", r.URL.Path,
			"target", r.Header.Get("X-Amz-Target"), "status", rec.status, "duration", elapsed)
	}
}

// statusRecorder remembers the status a handler wrote, for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Config returns the config in force.
func (g *Gateway) Config() *quota.Config { return g.policy.Load().cfg }

// serveReady answers /readyz: 503 while shutting down, or while the store
// reports it cannot serve (a Redis store that denies everything while Redis
// is down); the body's second line is the store's state.
func (g *Gateway) serveReady(w http.ResponseWriter, r *http.Request) {
	if !g.ready.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	hr, ok := g.limiter.(limiter.HealthReporter)
	if !ok {
		io.WriteString(w, "ready\n")
		return
	}
	h := hr.Health(r.Context())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !h.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready\nstore: "+h.Status+"\n")
		return
	}
	io.WriteString(w, "ready\nstore: "+h.Status+"\n")
}

// SetReady sets what /readyz answers; a server sets it to false when it
// starts shutting down, so load balancers stop sending traffic.
func (g *Gateway) SetReady(ready bool) { g.ready.Store(ready) }

// Reload replaces the config with the one Options.Reload returns. Bucket
// state is kept: a bucket's state means the same under any limit. An
// invalid new config is rejected and the old one keeps serving.
func (g *Gateway) Reload() error {
	if g.reload == nil {
		return nil
	}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	cfg, err := g.reload()
	if err == nil {
		err = g.setConfig(cfg)
	}
	if err != nil {
		g.metrics.reloads.WithLabelValues("error").Inc()
		g.log.Error("config reload rejected; the previous config keeps serving", "error", err)
		return err
	}
	g.metrics.reloads.WithLabelValues("ok").Inc()
	g.log.Info("config reloaded", "services", len(cfg.Services()))
	return nil
}

func (g *Gateway) setConfig(cfg *quota.Config) error {
	p := &policy{cfg: cfg, proxies: map[string]*httputil.ReverseProxy{}, counters: map[*quota.Category]*decisionCounters{}}
	for _, s := range cfg.Services() {
		for _, c := range s.Categories {
			p.counters[c] = g.metrics.countersFor(s.Name, c.Name)
			p.counters[c].live = g.live.Series(s.Name, c.Name)
		}
		if s.Upstream == "" {
			continue
		}
		u, err := url.Parse(s.Upstream)
		if err != nil {
			return fmt.Errorf("service %s: upstream: %w", s.Name, err)
		}
		p.proxies[s.Name] = g.newProxy(s.Name, u)
	}
	g.setPools(p, cfg)
	g.policy.Store(p)
	return nil
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeNativeError(w, http.StatusMethodNotAllowed, "", r.Method+" not allowed; use "+allow)
	}
}

// limitOf returns the limit of bucket k under cfg, after Options.Limits.
func (g *Gateway) limitOf(cfg *quota.Config, k quota.Key) (bucket.Limit, bool) {
	l, ok := cfg.Limit(k)
	if ok && g.limits != nil {
		l = g.limits.Limit(k, l)
	}
	return l, ok
}

// requestIDKey carries a request's id through a proxied request's context.
type requestIDKey struct{}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1, as
// Retry-After needs.
func retryAfterSeconds(d time.Duration) int64 {
	if d > math.MaxInt64-time.Second { // bucket.Never
		return int64(d / time.Second)
	}
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// logLimiterError logs a take the limiter could not decide: at error level,
// unless the client went away first (its context ended), which is routine.
func (g *Gateway) logLimiterError(r *http.Request, err error, args ...any) {
	level := slog.LevelError
	if r.Context().Err() != nil {
		level = slog.LevelDebug
	}
	g.log.Log(r.Context(), level, "limiter failed", append(args, "error", err)...)
}
