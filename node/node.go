package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter/memory"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/rls"
	"github.com/tollgate/tollgate/servicequotas"
)

// DefaultListen is the HTTP address when Options.Listen is empty.
const DefaultListen = "127.0.0.1:8080"

// The HTTP server's timeouts. A request's headers must arrive within
// readHeaderTimeout of its first byte (a client that trickles them, as
// slowloris does, is cut there), and all of it within readTimeout (its
// body also at the gateway's minimum rate, see gateway.Options). A
// connection idle for idleTimeout, a keep-alive one or a new one that
// has sent nothing yet (see headerClockListener), is closed: idle
// connections cost a goroutine and a descriptor each, and a client that
// wants one back reconnects in a round trip.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 60 * time.Second
)

// DefaultShutdownTimeout is Options.ShutdownTimeout when it is 0.
const DefaultShutdownTimeout = 10 * time.Second

// Options configure a Node. The zero value serves the built-in ecs and
// cloudmap presets from memory on DefaultListen, without admin endpoints
// and without the Envoy rate limit service. Every field that overrides
// the config file wins over it when set (as tollgate serve's flags do).
type Options struct {
	// Listen is the HTTP address (host:port); "" means DefaultListen.
	Listen string
	// TLS makes the HTTP listener serve HTTPS (HTTP/2 and HTTP/1.1) with
	// its certificate and key files and, with a CA file, require client
	// certificates that CA signed (mutual TLS). The files are re-read
	// when they change. Zero means plaintext.
	TLS config.TLS
	// ConfigPath is the config file (package config); "" means the
	// built-in presets. It is read again by every Reload.
	ConfigPath string
	// Credentials is a credentials file in the AWS shared credentials
	// format: with it, every AWS request must carry a valid Signature
	// Version 4 by one of its keys. It wins over the config's
	// auth.credentials_file; with neither, a request's claimed access
	// key id is trusted. The file is re-read when it changes.
	Credentials string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// AdminToken guards /v1/admin/; "" disables the admin endpoints.
	AdminToken string
	// MaxBodyBytes, MaxBatch and MaxInFlightBytes bound requests as
	// gateway.Options says; 0 means the gateway's defaults.
	MaxBodyBytes     int64
	MaxBatch         int
	MaxInFlightBytes int64
	// BodyIdleTimeout and BodyMinRate cut request bodies that stop
	// arriving, as gateway.Options says; 0 means the gateway's defaults.
	// The whole body must arrive within the server's read timeout.
	BodyIdleTimeout time.Duration
	BodyMinRate     float64
	// ShutdownTimeout is how long in-flight requests may take to finish
	// once shutdown starts; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// DrainDelay is how long to keep serving, with /readyz answering 503,
	// once shutdown starts; 0 means none.
	DrainDelay time.Duration
	// Store overrides the config's store section: each non-zero field
	// wins (TLS as a whole). The URL, from either, defaults to "memory".
	Store config.Store
	// DataDir is the directory of the embedded durable store that keeps
	// the Cloud Map registry and Service Quotas without Redis; "" keeps
	// them in memory. The config's store.data_dir wins unless DataDirSet
	// (the flag was given).
	DataDir    string
	DataDirSet bool
	// DenyCache, with Redis, denies takes of buckets known to be empty
	// without a round trip.
	DenyCache bool
	// StorePipelines is the Redis store's pipelines in flight; 0 means
	// its default.
	StorePipelines int
	// StoreNodes is the number of nodes sharing the Redis store: under
	// the local failure policy each decides from its share of a bucket
	// while Redis does not answer. 0 means the count of live nodes the
	// store reads in Redis (each node announces itself there); set, it
	// wins over the count.
	StoreNodes int
	// Memory bounds the memory store (buckets and bytes of keys held);
	// its zero value takes memory.Options' defaults.
	Memory memory.Options
	// BucketCheckpoint, with the memory store, is a file the buckets in
	// debt are written to every CheckpointEvery and when Run stops (after
	// the last request), and read from at New, so that a restart hands no
	// tenant a fresh burst (see memory.Store.SaveCheckpoint); "" keeps
	// none, unless DataDir (or the config's store.data_dir) names a data
	// directory: then its buckets.checkpoint. A checkpoint that is corrupt
	// or from a newer tollgate is refused. With Redis it is an error:
	// Redis keeps the buckets.
	BucketCheckpoint string
	// RLS overrides the config's rls section.
	RLS RLSOptions
	// Kube is how autoscaled services on Kubernetes reach the API server.
	Kube KubeOptions
	// Supervisor is the command every instance's command is started
	// through (pool/process.Options.Supervisor): tollgate's own
	// executable and process.SupervisorCommand, so that instances die
	// with it. nil starts instances directly.
	Supervisor []string
	// InstancePorts is where local instances' ports are picked from; zero
	// means 20000–31999 less the kernel's ephemeral range.
	InstancePorts process.PortRange
	// OnShutdown, when set, is called once when shutdown starts (the
	// binary makes a second signal kill the process from then on).
	OnShutdown func()
}

// Node is one assembled tollgate server: the config, the store, the
// gateway and its listener, the autoscaled pools, the Cloud Map registry,
// the live view and, with an rls config directory, the Envoy rate limit
// service. Build it with New, run it with Run.
type Node struct {
	opts       Options
	log        *slog.Logger
	gw         *gateway.Gateway
	srv        *http.Server
	ln         net.Listener
	sweep      *memory.Store     // the memory store to sweep; nil with Redis
	redis      *redisstore.Store // the Redis store to run (node announcements, start-up checks); nil with memory
	configName string
	release    func()                 // closes the store, the registry and the Kubernetes runners
	closeOnce  sync.Once              // of Close
	rls        *rls.Server            // the Envoy rate limit service; nil without an rls config directory
	rlsLn      net.Listener           // its gRPC listener
	rlsDir     string                 // the rls config directory in use
	certs      nodeCerts              // the TLS endpoints' certificate files, watched by Run
	creds      *credsFile             // the credentials file, watched by Run; nil without one
	pools      *pool.Pool             // the autoscaled services' instances
	live       *liveview.Recorder     // per-second decisions for /ui
	kube       *kubeRunners           // runners of services on Kubernetes
	quotas     *servicequotas.Service // the Service Quotas API and its approved values
	registry   *cloudmap.Registry     // the Cloud Map registry
	// stopping ends when shutdown starts (or Close is called); the
	// config reads of reloads end with it, so a reload never holds up
	// shutdown.
	stopping      context.Context
	startShutdown context.CancelFunc
	reloads       chan struct{}   // TriggerReload's requests, buffer 1
	reloadMu      sync.Mutex      // one Reload at a time, so the newest files win
	reloadCtx     context.Context // the running Reload's, under reloadMu; nil between reloads
}

// New loads the config (bounded by ctx and by config.ReadFile's limits),
// opens the store, builds every part and listens, but starts nothing: Run
// serves. Errors name the file, flag or address at fault. A Node that is
// never run must be closed.
func New(ctx context.Context, opts Options) (*Node, error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := config.Load(ctx, opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	warnConfig(log, cfg)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st := storeSettings(opts.Store, cfg.Store)
	if err := FitsStore(cfg.Quota, st); err != nil {
		return nil, err
	}
	if opts.StorePipelines < 0 {
		return nil, fmt.Errorf("--store-pipelines %d must not be negative", opts.StorePipelines)
	}
	if opts.StoreNodes < 0 {
		return nil, fmt.Errorf("--store-nodes %d must not be negative (0 counts the live nodes)", opts.StoreNodes)
	}
	configName := opts.ConfigPath
	if configName == "" {
		configName = "built-in presets"
	}
	var certs nodeCerts
	source := tlsSource{"--store-tls-cert", "--store-tls-key", "--store-tls-ca"}
	if opts.Store.TLS.IsZero() {
		source = tlsFields(configName, "store.tls", "ca_file")
	}
	if certs.store, err = loadStoreCerts(st, source, log); err != nil {
		return nil, err
	}
	// Every file is read before the store is dialled: a broken one is
	// refused at once, not after a Redis that is down has been waited for.
	rlsPlan, err := planRLS(ctx, opts.RLS, cfg.RLS, configName, st, log)
	if err != nil {
		return nil, err
	}
	certs.grpc = rlsPlan.certsOrNil()
	creds, err := loadCredentials(opts.Credentials, cfg, configName, log)
	if err != nil {
		return nil, err
	}
	var httpTLS *tls.Config
	if certs.http, httpTLS, err = loadListenerCerts(opts.TLS, "HTTP listener", tlsSource{"--tls-cert", "--tls-key", "--tls-client-ca"}, []string{"h2", "http/1.1"}, log); err != nil {
		return nil, err
	}
	if dir := dataDir(opts, cfg.Store); opts.BucketCheckpoint == "" && dir != "" && st.URL == "memory" {
		// The buckets in debt are kept beside the registry and Service
		// Quotas, so that a restart of the embedded default hands no
		// tenant a fresh burst either.
		opts.BucketCheckpoint = filepath.Join(dir, checkpointFile)
	}
	if opts.BucketCheckpoint != "" && st.URL != "memory" {
		return nil, fmt.Errorf("--bucket-checkpoint %s: the store is Redis, which keeps the buckets itself (see its persistence); a checkpoint is for the memory store", opts.BucketCheckpoint)
	}
	store, closeStore, redis, err := openStore(ctx, st, certs.storeTLS(), opts.Memory, opts.DenyCache, opts.StorePipelines, opts.StoreNodes, log, reg)
	if err != nil {
		return nil, err
	}
	if ms, ok := store.(*memory.Store); ok && opts.BucketCheckpoint != "" {
		restored, err := ms.LoadCheckpoint(opts.BucketCheckpoint)
		if err != nil {
			closeStore()
			return nil, fmt.Errorf("%w; move the file aside to start with every bucket full", err)
		}
		log.Info("bucket checkpoint read", "file", opts.BucketCheckpoint, "buckets_in_debt", restored, "every", CheckpointEvery)
	}
	durable, closeDurable, err := openDurable(opts, cfg.Store, st, log)
	if err != nil {
		closeStore()
		return nil, err
	}
	n := &Node{opts: opts, log: log, release: func() { closeDurable(); closeStore() }, redis: redis, configName: configName, certs: certs, creds: creds, reloads: make(chan struct{}, 1)}
	n.stopping, n.startShutdown = context.WithCancel(context.Background())
	// The registry and Service Quotas each load their part of the data
	// directory: side by side, which halves a start's wait on two cores.
	var registry *cloudmap.Registry
	var quotas *servicequotas.Service
	closeRegistry, closeQuotas := func() {}, func() {}
	var loads errgroup.Group
	loads.Go(func() error {
		r, c, err := newRegistry(st, durable, certs.storeTLS(), log)
		if err == nil {
			registry, closeRegistry = r, c
		}
		return err
	})
	loads.Go(func() (err error) {
		// The utilization report reads the live view, made below and
		// set before the node serves.
		q, c, err := newServiceQuotas(cfg, st, durable, certs.storeTLS(), log, func(account, region string) []servicequotas.BucketUse {
			return bucketUses(n.live, account, region)
		})
		if err == nil {
			quotas, closeQuotas = q, c
		}
		return err
	})
	err = loads.Wait()
	n.release = func() { closeQuotas(); closeRegistry(); closeDurable(); closeStore() }
	if err != nil {
		n.Close()
		return nil, err
	}
	// Autoscaled services: their pool runs until the HTTP server has
	// drained, then stops every instance within its grace period.
	// Services on Kubernetes: one runner per Deployment for tollgate's
	// life, closed before the pools stop so Deployments keep their pods.
	n.kube = newKubeRunners(opts.Kube, log, reg)
	n.quotas, n.registry = quotas, registry
	n.release = func() { n.kube.Close(); closeQuotas(); closeRegistry(); closeDurable(); closeStore() }
	builder := pools{log: log, registry: registry, kube: n.kube, supervisor: opts.Supervisor, ports: opts.InstancePorts}
	if durable != nil {
		builder.kept = boltRevisions{durable}
	} else if st.URL != "memory" {
		client, closeClient, err := storeClient(st, certs.storeTLS())
		if err != nil {
			n.Close()
			return nil, err
		}
		release := n.release
		n.release = func() { release(); closeClient() }
		builder.kept = redisRevisions{client: client, timeout: revisionsTimeout}
	}
	if n.pools, err = builder.newPool(cfg, reg); err != nil {
		n.Close()
		return nil, err
	}
	pools := n.pools
	if ms, ok := store.(*memory.Store); ok {
		n.sweep = ms
	}
	n.live = liveview.New(liveview.Options{Services: poolSamples(pools)}) // for /ui and /v1/admin/live/, run by run
	lastStore, lastRLS := cfg.Store, cfg.RLS
	n.rlsDir = rlsSettings(opts.RLS, cfg.RLS).ConfigDir
	if n.rls, n.rlsLn, err = rlsPlan.start(store, &rlsLive{rec: n.live}, opts.ShutdownTimeout, log, reg); err != nil {
		n.Close()
		return nil, err
	}
	handlers := map[string]http.Handler{"cloudmap": registry, "servicequotas": quotas}
	if creds == nil {
		warnUnverified(log, cfg, slices.Collect(maps.Keys(handlers)))
	}
	n.gw, err = gateway.New(gateway.Options{
		Verifier:   creds.verifier(),
		Routes:     rlsRoutes(n.rls),
		Handlers:   handlers,
		Limits:     quotas,
		Live:       n.live,
		Config:     cfg.Quota,
		Limiter:    store,
		Logger:     log,
		Registry:   reg,
		AdminToken: opts.AdminToken,
		// Reload is the config part of the node's Reload; the gateway
		// runs one at a time.
		Reload: func() (*quota.Config, error) {
			next, err := config.Load(n.readContext(), opts.ConfigPath)
			if err != nil {
				return nil, err
			}
			warnConfig(log, next)
			if err := FitsStore(next.Quota, st); err != nil {
				return nil, err
			}
			if err := builder.apply(pools, next); err != nil {
				return nil, err
			}
			if err := quotas.SetConfig(next.Quota, QuotaPolicy(next.ServiceQuotas)); err != nil {
				return nil, err
			}
			if next.Store != lastStore {
				log.Warn("the config's store section changed; store settings take effect on restart", "changed", strings.Join(storeChanges(lastStore, next.Store), ", "))
				lastStore = next.Store
			}
			if next.RLS != lastRLS { // the rls config directory's files do reload
				log.Warn("the config's rls section changed; rls settings take effect on restart")
				lastRLS = next.RLS
			}
			return next.Quota, nil
		},
		AdminReload:      n.Reload, // one reload path: the config and the rls directory
		MaxBodyBytes:     opts.MaxBodyBytes,
		MaxBatch:         opts.MaxBatch,
		MaxInFlightBytes: opts.MaxInFlightBytes,
		BodyIdleTimeout:  opts.BodyIdleTimeout,
		BodyMinRate:      opts.BodyMinRate,
		BodyTimeout:      readTimeout,
		Pools:            pools.Handler,
		AdminHandlers: withAdmin(map[string]http.Handler{
			"GET /v1/admin/pools":                     pools.AdminHandler(),
			"GET /v1/admin/pools/{service}/revisions": pools.RevisionsHandler(),
			"PUT /v1/admin/pools/{service}/traffic":   pools.TrafficHandler(),
			"POST /v1/admin/pools/{service}/traffic":  pools.TrafficHandler(),
			"GET /v1/admin/state/export":              stateExport{durable},
		}, quotas.AdminHandlers()),
	})
	if err != nil {
		n.Close()
		return nil, err
	}
	n.srv = &http.Server{
		Handler:           n.gw,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	n.srv.TLSConfig = httpTLS // HTTP/2 and HTTP/1.1 over TLS, as http.Server.ServeTLS offers them
	if n.ln, err = net.Listen("tcp", opts.Listen); err != nil {
		n.Close()
		return nil, err
	}
	fileLimit := openFileLimit()
	maxConns := connBound(fileLimit)
	n.ln = headerClockListener{Listener: boundListener(n.ln, maxConns), idle: idleTimeout, header: readHeaderTimeout}
	log.Info("listening", "addr", n.ln.Addr().String(), "tls", tlsMode(opts.TLS), "config", n.configName, "store", redactURL(st.URL), "admin", opts.AdminToken != "",
		"max_connections", maxConns, "open_file_limit", fileLimit)
	return n, nil
}

// Addr is the address the HTTP server listens on.
func (n *Node) Addr() net.Addr { return n.ln.Addr() }

// RLSAddr is the address of the Envoy rate limit service; nil without
// one.
func (n *Node) RLSAddr() net.Addr {
	if n.rlsLn == nil {
		return nil
	}
	return n.rlsLn.Addr()
}

// Gateway is the node's HTTP front door.
func (n *Node) Gateway() *gateway.Gateway { return n.gw }

// RLS is the node's Envoy rate limit service; nil without one.
func (n *Node) RLS() *rls.Server { return n.rls }

// Close releases what New opened (listeners, the store, the registry, the
// Kubernetes runners) and ends reloads in progress. Run closes the node
// when it returns; Close is for a node that is never run, and is safe to
// call more than once.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		n.startShutdown()
		if n.ln != nil {
			n.ln.Close()
		}
		if n.rlsLn != nil {
			n.rlsLn.Close()
		}
		n.release()
	})
}

// warnConfig logs each of cfg's warnings (valid, but likely not meant).
func warnConfig(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings {
		log.Warn("config warning", "warning", w.Error())
	}
}
