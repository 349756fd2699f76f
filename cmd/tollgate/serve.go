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

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/quota"
)

func serveCommand() command {
	return command{
		summary: "run the throttling server (AWS JSON wire, native API, admin, metrics)",
		run:     runServe,
	}
}

// serveFlags are the settings of `tollgate serve`.
type serveFlags struct {
	listen          string
	configPath      string
	logFormat       string
	logLevel        string
	adminTokenFile  string
	maxBody         int64
	shutdownTimeout time.Duration
	store           string
	storeTimeout    time.Duration
	storeOnFailure  string
	denyCache       bool
	storePipelines  int
	drainDelay      time.Duration
	cpuProfile      string
	kube            kubeFlags
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&f.configPath, "config", "", "quota config `FILE` (YAML); default: the built-in ecs and cloudmap presets")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error (debug logs every request)")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "`FILE` holding the admin bearer token (else $TOLLGATE_ADMIN_TOKEN; neither: admin endpoints disabled)")
	fs.Int64Var(&f.maxBody, "max-body", gateway.DefaultMaxBodyBytes, "largest request body accepted, in bytes")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	fs.StringVar(&f.store, "store", "", "where bucket state lives: memory, or a Redis `URL` (redis://host:port/db, rediss://, redis+cluster://, redis+sentinel://) shared by many nodes; default: the config's store.url, else memory")
	fs.DurationVar(&f.storeTimeout, "store-timeout", 0, "longest wait for Redis per decision before --store-on-failure decides (default: the config's store.timeout, else 50ms)")
	fs.StringVar(&f.storeOnFailure, "store-on-failure", "", "decisions while Redis is unreachable: open (allow) or closed (deny) (default: the config's store.on_failure, else open)")
	fs.BoolVar(&f.denyCache, "deny-cache", true, "with Redis, deny takes of buckets known to be empty without a round trip")
	fs.IntVar(&f.storePipelines, "store-pipelines", 0, "with Redis, pipelines in flight at once (0: the store's default, 2); 1 batches more per round trip, which suits a Redis on the same host")
	fs.DurationVar(&f.drainDelay, "drain-delay", 0, "on SIGTERM, how long to keep serving while /readyz answers 503, so load balancers stop sending traffic before the listener closes")
	fs.StringVar(&f.kube.kubeconfig, "kubeconfig", "", "kubeconfig `FILE` for autoscaled services on Kubernetes (else $KUBECONFIG, else the in-cluster config, else ~/.kube/config)")
	fs.BoolVar(&f.kube.leaderElect, "kube-leader-elect", false, "with several tollgate replicas in front of one Deployment: only the holder of a Lease writes replicas; all route")
	fs.StringVar(&f.kube.identity, "kube-identity", os.Getenv("POD_NAME"), "this replica's name in leader election (default $POD_NAME, else the host name)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE` (for performance work)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "tollgate serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := serve(ctx, stop, f, hup, stderr); err != nil {
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

// loadConfig reads the config file, or returns the built-in defaults.
func loadConfig(path string) (*quota.Config, error) {
	if path == "" {
		return quota.Default(), nil
	}
	return quota.Load(path)
}

func adminToken(file string) (string, error) {
	if file == "" {
		return os.Getenv("TOLLGATE_ADMIN_TOKEN"), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--admin-token-file %s is empty", file)
	}
	return tok, nil
}

// storeSettings merges the store flags over the config file's store
// section.
func storeSettings(f serveFlags, cfg *quota.Config) (quota.Store, error) {
	st := cfg.Store()
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
	case "open", "fail-open":
		st.OnFailure = "open"
	case "closed", "fail-closed":
		st.OnFailure = "closed"
	default:
		return st, fmt.Errorf("--store-on-failure %q: want open or closed", f.storeOnFailure)
	}
	if st.URL == "" {
		st.URL = "memory"
	}
	return st, nil
}

// openStore returns the limiter the store settings name, and a function
// that closes it.
func openStore(ctx context.Context, st quota.Store, denyCache bool, pipelines int, log *slog.Logger, reg prometheus.Registerer) (limiter.Limiter, func(), error) {
	if st.URL == "memory" {
		return memory.New(memory.Options{}), func() {}, nil
	}
	policy := redisstore.FailOpen
	if st.OnFailure == "closed" {
		policy = redisstore.FailClosed
	}
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

// serve runs the server until ctx ends, then shuts down gracefully.
// Each value on hup reloads the config.
func serve(ctx context.Context, stopSignals func(), f serveFlags, hup <-chan os.Signal, logOut io.Writer) error {
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
	cfg, err := loadConfig(f.configPath)
	if err != nil {
		return err
	}
	token, err := adminToken(f.adminTokenFile)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st, err := storeSettings(f, cfg)
	if err != nil {
		return err
	}
	if err := fitsStore(cfg, st); err != nil {
		return err
	}
	if f.storePipelines < 0 {
		return fmt.Errorf("--store-pipelines %d must not be negative", f.storePipelines)
	}
	store, closeStore, err := openStore(ctx, st, f.denyCache, f.storePipelines, log, reg)
	if err != nil {
		return err
	}
	defer closeStore()
	lastStore := cfg.Store()
	// Autoscaled services: their pool runs until the HTTP server has
	// drained, then stops every instance within its grace period.
	pools := pool.New(pool.Options{Logger: log, Registry: reg})
	kr := newKubeRunners(f.kube, log, reg)
	specs, err := poolSpecs(cfg, log, kr)
	if err == nil {
		err = pools.Apply(specs)
	}
	if err != nil {
		return err
	}
	poolCtx, stopPools := context.WithCancel(context.Background())
	poolsDone := make(chan error, 1)
	go func() { poolsDone <- pools.Run(poolCtx) }()
	defer func() {
		kr.Close() // first: Deployments keep their pods for the next tollgate
		stopPools()
		if n := len(pools.Services()); n > 0 {
			log.Info("stopping the instances of autoscaled services", "services", n)
		}
		<-poolsDone
	}()
	if ms, ok := store.(*memory.Store); ok {
		go sweepEvery(ctx, ms, 10*time.Second)
	}
	g, err := gateway.New(gateway.Options{
		Config:     cfg,
		Limiter:    store,
		Logger:     log,
		Registry:   reg,
		AdminToken: token,
		Reload: func() (*quota.Config, error) {
			next, err := loadConfig(f.configPath)
			if err != nil {
				return nil, err
			}
			if err := fitsStore(next, st); err != nil {
				return nil, err
			}
			specs, err := poolSpecs(next, log, kr)
			if err == nil {
				err = pools.Apply(specs)
			}
			if err != nil {
				return nil, err
			}
			if next.Store() != lastStore {
				log.Warn("the config's store section changed; store settings take effect on restart")
				lastStore = next.Store()
			}
			return next, nil
		},
		MaxBodyBytes:  f.maxBody,
		Pools:         pools.Handler,
		AdminHandlers: map[string]http.Handler{"GET /v1/admin/pools": pools.AdminHandler()},
	})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	configName := f.configPath
	if configName == "" {
		configName = "built-in presets"
	}
	log.Info("listening", "addr", ln.Addr().String(), "config", configName, "store", redactURL(st.URL), "admin", token != "")

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	for {
		select {
		case err := <-errc:
			return err
		case <-hup:
			log.Info("SIGHUP: reloading config", "config", configName)
			g.Reload() // logs its own outcome; a bad config keeps the old one
		case <-ctx.Done():
			stopSignals() // a second SIGTERM or SIGINT now kills the process
			g.SetReady(false)
			if f.drainDelay > 0 {
				log.Info("draining: /readyz answers 503", "delay", f.drainDelay)
				time.Sleep(f.drainDelay)
			}
			log.Info("shutting down: finishing in-flight requests", "timeout", f.shutdownTimeout)
			sctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
			err := srv.Shutdown(sctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				srv.Close()
				return fmt.Errorf("in-flight requests still running after %v; closed them", f.shutdownTimeout)
			}
			if err != nil {
				return err
			}
			log.Info("stopped")
			return nil
		}
	}
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
func fitsStore(cfg *quota.Config, st quota.Store) error {
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
