package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/rls"
)

func serveCommand() command {
	return command{
		summary: "run the throttling server (AWS JSON wire, native API, admin, metrics)",
		run:     runServe,
	}
}

// serveFlags are the settings of `tollgate serve`. Every flag is declared
// here and registered in define, nowhere else.
type serveFlags struct {
	listen          string
	configPath      string
	logFormat       string
	logLevel        string
	adminTokenFile  string
	maxBody         int64
	maxBatch        int
	maxInFlight     int64
	shutdownTimeout time.Duration
	store           string
	storeTimeout    time.Duration
	storeOnFailure  string
	denyCache       bool
	storePipelines  int
	memMaxBuckets   int
	memMaxKeyBytes  int64
	drainDelay      time.Duration
	cpuProfile      string
	grpcListen      string
	rlsConfig       string
	rlsHeaders      optBool
	rlsMerge        optBool
	rlsShadow       optBool
	rlsHeaderNames  [3]string // limit, remaining, reset; "" for the config's, else envoy ratelimit's
	kube            kubeFlags
}

// define registers every flag of `tollgate serve` on fs, with its default.
func (f *serveFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&f.configPath, "config", "", "quota config `FILE` (YAML); default: the built-in ecs and cloudmap presets")
	choiceVar(fs, &f.logFormat, "log-format", "text", []string{"text", "json"}, "log `FORMAT`: text or json")
	choiceVar(fs, &f.logLevel, "log-level", "info", []string{"debug", "info", "warn", "error"}, "log `LEVEL`: debug, info, warn or error (debug logs every request)")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "`FILE` holding the admin bearer token (else $TOLLGATE_ADMIN_TOKEN; neither: admin endpoints disabled)")
	fs.Int64Var(&f.maxBody, "max-body", gateway.DefaultMaxBodyBytes, "largest request body accepted, in bytes")
	fs.IntVar(&f.maxBatch, "max-batch", gateway.DefaultMaxBatch, "most takes in one /v1/take/batch request; a larger batch is answered 400")
	fs.Int64Var(&f.maxInFlight, "max-in-flight-bytes", gateway.DefaultMaxInFlightBytes, "bound on request bytes being served at once (bodies, plus 640 per batch take); over it requests get 503 with Retry-After; -1: no bound")
	durationVar(fs, &f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	fs.Var(&storeValue{&f.store}, "store", "where bucket state lives: memory, or a Redis `URL` (redis://host:port/db, rediss://, redis+cluster://, redis+sentinel://) shared by many nodes; default: the config's store.url, else memory")
	durationVar(fs, &f.storeTimeout, "store-timeout", 0, "longest wait for Redis per decision before --store-on-failure decides (default: the config's store.timeout, else 50ms)")
	choiceVar(fs, &f.storeOnFailure, "store-on-failure", "", []string{"local", "open", "closed", "fail-local", "fail-open", "fail-closed"}, "decisions while Redis does not answer: local (each node from its own in-memory bucket at the configured limit), open (allow) or closed (deny, and /readyz answers 503) (default: the config's store.on_failure, else local)")
	fs.BoolVar(&f.denyCache, "deny-cache", true, "with Redis, deny takes of buckets known to be empty without a round trip")
	fs.IntVar(&f.memMaxBuckets, "memory-max-buckets", memory.DefaultMaxBuckets, "with the memory store, the most buckets in debt it holds; beyond it the buckets closest to full are forgotten (counted in tollgate_buckets_evicted_total); -1: no bound")
	fs.Int64Var(&f.memMaxKeyBytes, "memory-max-key-bytes", memory.DefaultMaxKeyBytes, "with the memory store, the most bytes of bucket keys it holds, as --memory-max-buckets; -1: no bound")
	fs.IntVar(&f.storePipelines, "store-pipelines", 0, "with Redis, pipelines in flight at once (0: the store's default, 2); 1 batches more per round trip, which suits a Redis on the same host")
	durationVar(fs, &f.drainDelay, "drain-delay", 0, "on SIGTERM, how long to keep serving while /readyz answers 503, so load balancers stop sending traffic before the listener closes")
	fs.StringVar(&f.grpcListen, "grpc-listen", "", "address of the Envoy rate limit service (gRPC), served when there is an rls config directory (default: the config's rls.grpc_listen, else 127.0.0.1:8081)")
	fs.StringVar(&f.rlsConfig, "rls-config", "", "envoy ratelimit's config `DIR` (every file in it, read as envoy ratelimit reads them) for the Envoy rate limit service; reloaded on SIGHUP (default: the config's rls.config_dir)")
	fs.Var(&f.rlsMerge, "rls-merge-domains", "let several rls config files add to one domain (envoy ratelimit's MERGE_DOMAIN_CONFIG) (default: the config's rls.merge_domains)")
	fs.Var(&f.rlsShadow, "rls-shadow-mode", "decide and count every Envoy rate limit request but answer OK (envoy ratelimit's SHADOW_MODE), e.g. while migrating (default: the config's rls.shadow_mode)")
	fs.Var(&f.rlsHeaders, "rls-response-headers", "add the limit, remaining and reset headers to Envoy rate limit answers (envoy ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED) (default: the config's rls.response_headers)")
	fs.StringVar(&f.rlsHeaderNames[0], "rls-limit-header", "", "`NAME` of the limit header (envoy ratelimit's LIMIT_LIMIT_HEADER; default: the config's rls.limit_header, else RateLimit-Limit)")
	fs.StringVar(&f.rlsHeaderNames[1], "rls-remaining-header", "", "`NAME` of the remaining header (LIMIT_REMAINING_HEADER; default: the config's rls.remaining_header, else RateLimit-Remaining)")
	fs.StringVar(&f.rlsHeaderNames[2], "rls-reset-header", "", "`NAME` of the reset header (LIMIT_RESET_HEADER; default: the config's rls.reset_header, else RateLimit-Reset)")
	fs.StringVar(&f.kube.kubeconfig, "kubeconfig", "", "kubeconfig `FILE` for autoscaled services on Kubernetes (else $KUBECONFIG, else the in-cluster config, else ~/.kube/config)")
	fs.BoolVar(&f.kube.leaderElect, "kube-leader-elect", false, "with several tollgate replicas in front of one Deployment: only the holder of a Lease writes replicas; all route")
	fs.StringVar(&f.kube.identity, "kube-identity", os.Getenv("POD_NAME"), "this replica's name in leader election (default $POD_NAME, else the host name)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE` (for performance work)")
}

// serveSynopsis is the head of `tollgate serve --help`.
const serveSynopsis = `tollgate serve [flags]

Run the throttling server: the AWS JSON wire (ECS, Cloud Map) and the
native /v1/take API on one port, with /healthz, /readyz, /metrics and,
with a token, /v1/admin. SIGHUP reloads the config; SIGTERM or SIGINT
shuts down gracefully (a second one kills).`

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve")
	var f serveFlags
	f.define(fs)
	if code, ok := parseFlags(fs, serveSynopsis, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(stderr, "serve", "unexpected argument %q", fs.Arg(0))
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// After the first SIGTERM or SIGINT, a second one kills the process.
	stopSignals := func() { signal.Reset(syscall.SIGTERM, syscall.SIGINT) }
	if err := serve(context.Background(), f, sigs, stopSignals, stderr); err != nil {
		fmt.Fprintln(stderr, "tollgate serve:", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// maxTokenBytes bounds the admin token file.
const maxTokenBytes = 4 << 10

// adminToken returns the admin bearer token from the file, else from
// $TOLLGATE_ADMIN_TOKEN, with surrounding whitespace (a trailing newline)
// trimmed from either; "" when neither is set. A token that is empty
// after trimming is an error: it would lock everyone out without a word.
func adminToken(ctx context.Context, file string) (string, error) {
	if file == "" {
		env, ok := os.LookupEnv("TOLLGATE_ADMIN_TOKEN")
		if !ok {
			return "", nil
		}
		tok := strings.TrimSpace(env)
		if tok == "" {
			return "", errors.New("TOLLGATE_ADMIN_TOKEN is set but empty (after trimming whitespace); unset it to disable the admin endpoints")
		}
		return tok, nil
	}
	b, err := config.ReadFile(ctx, "--admin-token-file", file, config.Limits{MaxBytes: maxTokenBytes})
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--admin-token-file %s is empty (after trimming whitespace)", file)
	}
	return tok, nil
}

// storeSettings merges the store flags over the config file's store
// section.
func storeSettings(f serveFlags, cfg *config.Config) (config.Store, error) {
	st := cfg.Store
	if f.store != "" {
		st.URL = f.store
	}
	if f.storeTimeout != 0 {
		if f.storeTimeout < 0 {
			return st, fmt.Errorf("--store-timeout %v must be positive", f.storeTimeout)
		}
		st.Timeout = f.storeTimeout
	}
	switch f.storeOnFailure {
	case "":
	case "local", "fail-local":
		st.OnFailure = "local"
	case "open", "fail-open":
		st.OnFailure = "open"
	case "closed", "fail-closed":
		st.OnFailure = "closed"
	default:
		return st, fmt.Errorf("--store-on-failure %q: want local, open or closed", f.storeOnFailure)
	}
	if st.URL == "" {
		st.URL = "memory"
	}
	return st, nil
}

// openStore returns the limiter the store settings name, and a function
// that closes it.
func openStore(ctx context.Context, st config.Store, mem memory.Options, denyCache bool, pipelines int, log *slog.Logger, reg prometheus.Registerer) (limiter.Limiter, func(), error) {
	if st.URL == "memory" {
		return memory.New(mem), func() {}, nil
	}
	policy := redisstore.FailLocal
	if st.OnFailure != "" {
		p, err := redisstore.ParseFailurePolicy(st.OnFailure)
		if err != nil {
			return nil, nil, fmt.Errorf("--store-on-failure: %w", err)
		}
		policy = p
	}
	// go-redis's own lines (failed dials) go to the server's log, as
	// seldom as the store's warnings.
	redisstore.SetClientLogger(log, 0)
	store, err := redisstore.Open(st.URL, redisstore.Options{
		Timeout:       st.Timeout,
		FailurePolicy: policy,
		DenyCache:     denyCache,
		Pipelines:     pipelines,
		Logger:        log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("--store: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := store.Ping(pctx); err != nil {
		log.Warn("Redis store not reachable at start; deciding by the failure policy until it is",
			"on_failure", policy.String(), "error", err)
	}
	cancel()
	stat := func(pick func(redisstore.Stats) uint64) func() float64 {
		return func() float64 { return float64(pick(store.Stats())) }
	}
	for _, c := range []struct {
		source string
		pick   func(redisstore.Stats) uint64
	}{
		{"redis", func(s redisstore.Stats) uint64 { return s.Redis }},
		{"deny_cache", func(s redisstore.Stats) uint64 { return s.Cached }},
		{"failure_policy", func(s redisstore.Stats) uint64 { return s.Fallback }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "tollgate_store_decisions_total",
			Help:        "Decisions of the Redis store by who made them: Redis, the local deny cache, or the failure policy while Redis was unreachable.",
			ConstLabels: prometheus.Labels{"source": c.source},
		}, stat(c.pick)))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tollgate_store_errors_total",
		Help: "Failed calls to Redis (each decides up to 128 takes by the failure policy).",
	}, stat(func(s redisstore.Stats) uint64 { return s.Errors })))
	return store, func() { store.Close() }, nil
}

// serve builds the server from f and runs it until a SIGTERM or SIGINT
// arrives on sigs (or ctx ends), then shuts it down in two phases. A
// SIGHUP on sigs reloads the config. stopSignals is called when shutdown
// starts, so that a second signal kills the process. serve returns only
// once every goroutine it started has stopped.
func serve(ctx context.Context, f serveFlags, sigs <-chan os.Signal, stopSignals func(), logOut io.Writer) error {
	log, err := newLogger(logOut, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	// stopping ends when shutdown starts; config reads in progress end
	// with it.
	stopping, startShutdown := context.WithCancel(ctx)
	defer startShutdown()
	s, err := build(stopping, f, log)
	if err != nil {
		return err
	}
	defer s.close()
	return s.run(stopping, startShutdown, sigs, stopSignals)
}

// node is a built `tollgate serve`: config, store, gateway and listener,
// ready to run.
type node struct {
	f          serveFlags
	log        *slog.Logger
	gw         *gateway.Gateway
	srv        *http.Server
	ln         net.Listener
	sweep      *memory.Store // the memory store to sweep; nil with Redis
	configName string
	close      func()             // closes the store, after run has returned
	rls        *rls.Server        // the Envoy rate limit service; nil without --rls-config
	rlsLn      net.Listener       // its gRPC listener
	pools      *pool.Pool         // the autoscaled services' instances
	live       *liveview.Recorder // per-second decisions for /ui
	kube       *kubeRunners       // runners of services on Kubernetes
}

// build loads the config, opens the store, and makes the gateway and the
// listener. ctx bounds the config reads of later reloads.
func build(ctx context.Context, f serveFlags, log *slog.Logger) (*node, error) {
	cfg, err := config.Load(ctx, f.configPath)
	if err != nil {
		return nil, err
	}
	warnConfig(log, cfg)
	token, err := adminToken(ctx, f.adminTokenFile)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st, err := storeSettings(f, cfg)
	if err != nil {
		return nil, err
	}
	if err := fitsStore(cfg.Quota, st); err != nil {
		return nil, err
	}
	if f.storePipelines < 0 {
		return nil, fmt.Errorf("--store-pipelines %d must not be negative", f.storePipelines)
	}
	store, closeStore, err := openStore(ctx, st, memory.Options{MaxBuckets: f.memMaxBuckets, MaxKeyBytes: f.memMaxKeyBytes}, f.denyCache, f.storePipelines, log, reg)
	if err != nil {
		return nil, err
	}
	s := &node{f: f, log: log, close: closeStore, configName: f.configPath}
	if s.configName == "" {
		s.configName = "built-in presets"
	}
	registry, closeRegistry, err := newRegistry(st, log)
	if err != nil {
		closeStore()
		return nil, err
	}
	s.close = func() { closeRegistry(); closeStore() }
	// Autoscaled services: their pool runs until the HTTP server has
	// drained, then stops every instance within its grace period.
	// Services on Kubernetes: one runner per Deployment for tollgate's
	// life, closed before the pools stop so Deployments keep their pods.
	s.kube = newKubeRunners(f.kube, log, reg)
	s.close = func() { s.kube.Close(); closeRegistry(); closeStore() }
	if s.pools, err = newPools(cfg, log, reg, registry, s.kube); err != nil {
		s.close()
		return nil, err
	}
	pools := s.pools
	if ms, ok := store.(*memory.Store); ok {
		s.sweep = ms
	}
	s.live = liveview.New(liveview.Options{Services: poolSamples(pools)}) // for /ui and /v1/admin/live/, run by run
	lastStore, lastRLS := cfg.Store, cfg.RLS
	s.gw, err = gateway.New(gateway.Options{
		Handlers:   map[string]http.Handler{"cloudmap": registry},
		Live:       s.live,
		Config:     cfg.Quota,
		Limiter:    store,
		Logger:     log,
		Registry:   reg,
		AdminToken: token,
		// Reload serves SIGHUP and /v1/admin/reload; the gateway runs one
		// at a time.
		Reload: func() (*quota.Config, error) {
			next, err := config.Load(ctx, f.configPath)
			if err != nil {
				return nil, err
			}
			warnConfig(log, next)
			if err := fitsStore(next.Quota, st); err != nil {
				return nil, err
			}
			if err := applyPools(pools, next, log, registry, s.kube); err != nil {
				return nil, err
			}
			if next.Store != lastStore {
				log.Warn("the config's store section changed; store settings take effect on restart")
				lastStore = next.Store
			}
			if next.RLS != lastRLS { // the rls config directory's files do reload
				log.Warn("the config's rls section changed; rls settings take effect on restart")
				lastRLS = next.RLS
			}
			return next.Quota, nil
		},
		MaxBodyBytes:     f.maxBody,
		MaxBatch:         f.maxBatch,
		MaxInFlightBytes: f.maxInFlight,
		Pools:            pools.Handler,
		AdminHandlers:    map[string]http.Handler{"GET /v1/admin/pools": pools.AdminHandler()},
	})
	if err != nil {
		s.close()
		return nil, err
	}
	if s.rls, s.rlsLn, err = buildRLS(ctx, f, cfg.RLS, s.configName, st, store, log, reg); err != nil {
		s.close()
		return nil, err
	}
	s.srv = &http.Server{
		Handler:           s.gw,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if s.ln, err = net.Listen("tcp", f.listen); err != nil {
		if s.rlsLn != nil {
			s.rlsLn.Close()
		}
		s.close()
		return nil, err
	}
	log.Info("listening", "addr", s.ln.Addr().String(), "config", s.configName, "store", redactURL(st.URL), "admin", token != "")
	return s, nil
}

// run serves until stopping ends (startShutdown ends it on SIGTERM or
// SIGINT) or a goroutine fails, then shuts down in two phases:
//
//  1. drain: /readyz answers 503 while requests are still served for
//     --drain-delay, so load balancers stop sending traffic;
//  2. stop: the listener closes, in-flight requests get up to
//     --shutdown-timeout to finish, then the background work (sweeper)
//     stops.
//
// Every goroutine (signals, reload worker, sweeper, HTTP server, shutdown)
// runs in one errgroup; run returns once all have stopped, with the first
// error. Reloads run in their own worker, never on the signal path, so a
// reload that hangs cannot delay shutdown.
func (s *node) run(stopping context.Context, startShutdown context.CancelFunc, sigs <-chan os.Signal, stopSignals func()) error {
	grp, failed := errgroup.WithContext(stopping)
	background, stopBackground := context.WithCancel(context.Background())
	defer stopBackground()
	reloads := make(chan struct{}, 1)
	served := make(chan struct{}) // closed when the HTTP server has returned

	grp.Go(func() error { // signals
		for {
			select {
			case <-failed.Done():
				return nil
			case sig := <-sigs:
				if sig == syscall.SIGHUP {
					select {
					case reloads <- struct{}{}:
						s.log.Info("SIGHUP: reloading config", "config", s.configName)
					default:
						s.log.Info("SIGHUP: a reload is already pending", "config", s.configName)
					}
					continue
				}
				s.log.Info("signal received: shutting down", "signal", sig.String())
				startShutdown()
				return nil
			}
		}
	})
	grp.Go(func() error { // reload worker
		for {
			select {
			case <-failed.Done():
				return nil
			case <-reloads:
				s.gw.Reload() // logs its own outcome; a bad config keeps the old one
				if s.rls != nil {
					s.rls.Reload() // the same
				}
			}
		}
	})
	if s.sweep != nil {
		grp.Go(func() error {
			sweepEvery(background, s.sweep, 10*time.Second)
			return nil
		})
	}
	if s.rls != nil {
		grp.Go(func() error { // Envoy rate limit service (gRPC), stopped with the background work
			if err := s.rls.Run(background, s.rlsLn); err != nil {
				return fmt.Errorf("envoy rate limit service: %w", err)
			}
			return nil
		})
	}
	grp.Go(func() error { // live view: per-second aggregates until the background work stops
		return s.live.Run(background)
	})
	grp.Go(func() error { // autoscaled services: stopped, every instance within its grace, after the server drained
		if err := s.pools.Run(background); err != nil {
			return fmt.Errorf("autoscaled services: %w", err)
		}
		return nil
	})
	grp.Go(func() error { // HTTP server
		defer close(served)
		if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving: %w", err)
		}
		return nil
	})
	grp.Go(func() error { // two-phase shutdown
		defer func() {
			s.kube.Close() // first: Deployments keep their pods for the next tollgate
			stopBackground()
		}()
		<-failed.Done()
		startShutdown() // ends a config read in progress
		stopSignals()   // a second SIGTERM or SIGINT now kills the process
		// Phase 1: drain.
		s.gw.SetReady(false)
		if s.f.drainDelay > 0 {
			s.log.Info("draining: /readyz answers 503", "delay", s.f.drainDelay)
			t := time.NewTimer(s.f.drainDelay)
			select {
			case <-t.C:
			case <-served: // nothing left to drain
			}
			t.Stop()
		}
		// Phase 2: stop.
		s.log.Info("shutting down: finishing in-flight requests", "timeout", s.f.shutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), s.f.shutdownTimeout)
		defer cancel()
		if err := s.srv.Shutdown(sctx); err != nil {
			s.srv.Close()
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("in-flight requests still running after %v; closed them", s.f.shutdownTimeout)
			}
			return err
		}
		return nil
	})
	err := grp.Wait()
	if err == nil {
		s.log.Info("stopped")
	}
	return err
}

// redactURL hides the passwords of a store URL (its user info and any
// password option), for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// fitsStore checks that the store can hold every limit of cfg: the Redis
// script is exact only for buckets that refill within redis.MaxWindow.
func fitsStore(cfg *quota.Config, st config.Store) error {
	if st.URL == "memory" {
		return nil
	}
	check := func(what string, l bucket.Limit) error {
		if window := time.Duration(l.Capacity()) * l.Interval(); l.Interval() > redisstore.MaxWindow || window > redisstore.MaxWindow || window < 0 {
			return fmt.Errorf("%s: limit %v takes longer than %v to refill, more than the Redis store supports", what, l, redisstore.MaxWindow)
		}
		return nil
	}
	for _, s := range cfg.Services() {
		for _, c := range s.Categories {
			if err := check("service "+s.Name+" category "+c.Name, c.Limit); err != nil {
				return err
			}
		}
	}
	for _, o := range cfg.Overrides() {
		if err := check("override for account "+o.Account+" of "+o.Service+"/"+o.Category, o.Limit); err != nil {
			return err
		}
	}
	return nil
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

// warnConfig logs each of cfg's warnings (valid, but likely not meant).
func warnConfig(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings {
		log.Warn("config warning", "warning", w.Error())
	}
}
