package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/node"
	"github.com/tollgate/tollgate/pool/process"
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
	listen           string
	configPath       string
	logFormat        string
	logLevel         string
	adminTokenFile   string
	maxBody          int64
	maxBatch         int
	maxInFlight      int64
	bodyIdleTimeout  time.Duration
	bodyMinRate      int64
	shutdownTimeout  time.Duration
	store            string
	dataDir          dataDirValue
	storeTimeout     time.Duration
	storeOnFailure   string
	denyCache        bool
	storePipelines   int
	memMaxBuckets    int
	memMaxKeyBytes   int64
	bucketCheckpoint string
	storeNodes       int
	rlsRequireDomain bool
	rlsWatch         bool
	drainDelay       time.Duration
	cpuProfile       string
	grpcListen       string
	rlsConfig        string
	rlsHeaders       optBool
	rlsMerge         optBool
	rlsShadow        optBool
	rlsHeaderNames   [3]string // limit, remaining, reset; "" for the config's, else envoy ratelimit's
	kube             kubeFlags
	httpTLS          config.TLS        // --tls-cert, --tls-key, --tls-client-ca
	grpcTLS          config.TLS        // --grpc-tls-cert, --grpc-tls-key, --grpc-tls-client-ca
	storeTLS         config.TLS        // --store-tls-ca, --store-tls-cert, --store-tls-key
	credentials      string            // --credentials
	instancePorts    process.PortRange // --instance-ports
}

// kubeFlags are serve's Kubernetes flags.
type kubeFlags struct {
	kubeconfig    string
	leaderElect   bool
	identity      string
	leaseDuration time.Duration
}

// define registers every flag of `tollgate serve` on fs, with its default.
func (f *serveFlags) define(fs *flag.FlagSet) {
	addrVar(fs, &f.listen, "listen", "127.0.0.1:8080", "`HOST:PORT` to listen on (:PORT for every interface)")
	fs.StringVar(&f.configPath, "config", "", "quota config `FILE` (YAML); default: the built-in ecs, cloudmap and servicequotas presets")
	choiceVar(fs, &f.logFormat, "log-format", "text", []string{"text", "json"}, "log `FORMAT`: text or json")
	choiceVar(fs, &f.logLevel, "log-level", "info", []string{"debug", "info", "warn", "error"}, "log `LEVEL`: debug, info, warn or error (debug logs every request)")
	fs.StringVar(&f.credentials, "credentials", "", "AWS shared credentials `FILE` ([name] sections with aws_access_key_id and aws_secret_access_key): every AWS request must then carry a valid SigV4 signature by one of its keys; re-read when it changes (default: the config's auth.credentials_file, else signatures are not verified)")
	fs.Func("instance-ports", "`LOW-HIGH`: the ports local autoscaled instances are given, inclusive (a firewall's or a benchmark's fixed range; default: 20000-31999 less the kernel's ephemeral range)", func(s string) error {
		r, err := process.ParsePortRange(s)
		f.instancePorts = r
		return err
	})
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "`FILE` holding the admin bearer token (else $TOLLGATE_ADMIN_TOKEN; neither: admin endpoints disabled)")
	fs.Int64Var(&f.maxBody, "max-body", gateway.DefaultMaxBodyBytes, "largest request body accepted, in bytes")
	fs.IntVar(&f.maxBatch, "max-batch", gateway.DefaultMaxBatch, "most takes in one /v1/take/batch request; a larger batch is answered 400")
	fs.Int64Var(&f.maxInFlight, "max-in-flight-bytes", gateway.DefaultMaxInFlightBytes, "bound on request bytes being served at once (bodies as they arrive, plus 640 per batch take), shared: one client address may hold an eighth, and the last quarter is kept for keys that verified lately; over it requests get 503 with Retry-After; -1: no bound")
	durationVar(fs, &f.bodyIdleTimeout, "body-idle-timeout", gateway.DefaultBodyIdleTimeout, "a request body whose next bytes take longer than this to arrive is cut (408, connection closed), as nginx's client_body_timeout")
	fs.Int64Var(&f.bodyMinRate, "body-min-rate", gateway.DefaultBodyMinRate, "after its first --body-idle-timeout a request body must arrive at this many bytes a second on average, or it is cut")
	durationVar(fs, &f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	fs.Var(&storeValue{&f.store}, "store", "where bucket state lives: memory, or a Redis `URL` (redis://host:port/db, rediss://, redis+cluster://, redis+sentinel://) shared by many nodes; default: the config's store.url, else memory")
	fs.Var(&f.dataDir, "data-dir", "`DIR` of the durable file (tollgate.db) that keeps the Cloud Map registry and Service Quotas requests, history and approved values when the store is not Redis; '' keeps them in memory (default: the config's store.data_dir, else $TOLLGATE_DATA_DIR, else $XDG_STATE_HOME/tollgate, else ~/.local/state/tollgate)")
	durationVar(fs, &f.storeTimeout, "store-timeout", 0, "least wait for Redis per decision before --store-on-failure decides; while Redis answers slowly the wait grows, up to 4 times this (default: the config's store.timeout, else 50ms)")
	choiceVar(fs, &f.storeOnFailure, "store-on-failure", "", []string{"local", "open", "closed", "fail-local", "fail-open", "fail-closed"}, "decisions while Redis does not answer: local (each node continues from the state Redis last reported, within its --store-nodes share), open (allow) or closed (deny, and /readyz answers 503) (default: the config's store.on_failure, else local)")
	fs.BoolVar(&f.denyCache, "deny-cache", true, "with Redis, deny takes of buckets known to be empty without a round trip")
	fs.IntVar(&f.memMaxBuckets, "memory-max-buckets", memory.DefaultMaxBuckets, "with the memory store, the most buckets in debt it holds; beyond it the buckets closest to full are forgotten (counted in tollgate_buckets_evicted_total); -1: no bound")
	fs.Int64Var(&f.memMaxKeyBytes, "memory-max-key-bytes", memory.DefaultMaxKeyBytes, "with the memory store, the most bytes of bucket keys it holds, as --memory-max-buckets; -1: no bound")
	fs.StringVar(&f.bucketCheckpoint, "bucket-checkpoint", "", "with the memory store, a file the buckets in debt are written to every 5s and at shutdown, and read at start, so a restart hands no tenant a fresh burst (a crash forgets at most the last 5s of takes); a corrupt or newer file is refused (default: buckets.checkpoint in the data directory)")
	fs.IntVar(&f.storeNodes, "store-nodes", 0, "with Redis and --store-on-failure local, the number of tollgate nodes sharing the store: while Redis does not answer, each node decides from its share (capacity and refill divided by this number); 0 counts the live nodes, which announce themselves in Redis, and a number set wins over the count")
	fs.IntVar(&f.storePipelines, "store-pipelines", 0, "with Redis, pipelines in flight at once (0: the store's default, 2); 1 batches more per round trip, which suits a Redis on the same host")
	durationVar(fs, &f.drainDelay, "drain-delay", 0, "on SIGTERM, how long to keep serving while /readyz answers 503, so load balancers stop sending traffic before the listener closes")
	addrVar(fs, &f.grpcListen, "grpc-listen", "", "`HOST:PORT` of the Envoy rate limit service (gRPC), served when there is an rls config directory (default: the config's rls.grpc_listen, else 127.0.0.1:8081)")
	fs.StringVar(&f.rlsConfig, "rls-config", "", "envoy ratelimit's config `DIR` (every file in it, read as envoy ratelimit reads them) for the Envoy rate limit service; reloaded on SIGHUP and /v1/admin/reload (default: the config's rls.config_dir)")
	fs.BoolVar(&f.rlsWatch, "rls-watch", true, "reload when a file of the rls config directory changes (fsnotify, debounced; Kubernetes ConfigMap updates included), as envoy ratelimit does; the same bounded reload as SIGHUP")
	fs.BoolVar(&f.rlsRequireDomain, "rls-require-domain", false, "refuse to start (and refuse a reload) when the rls config directory defines no domain; without it such a config is logged at ERROR and answers OK to everything")
	fs.Var(&f.rlsMerge, "rls-merge-domains", "let several rls config files add to one domain (envoy ratelimit's MERGE_DOMAIN_CONFIG) (default: the config's rls.merge_domains)")
	fs.Var(&f.rlsShadow, "rls-shadow-mode", "decide and count every Envoy rate limit request but answer OK (envoy ratelimit's SHADOW_MODE), e.g. while migrating (default: the config's rls.shadow_mode)")
	fs.Var(&f.rlsHeaders, "rls-response-headers", "add the limit, remaining and reset headers to Envoy rate limit answers (envoy ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED) (default: the config's rls.response_headers)")
	fs.StringVar(&f.rlsHeaderNames[0], "rls-limit-header", "", "`NAME` of the limit header (envoy ratelimit's LIMIT_LIMIT_HEADER; default: the config's rls.limit_header, else RateLimit-Limit)")
	fs.StringVar(&f.rlsHeaderNames[1], "rls-remaining-header", "", "`NAME` of the remaining header (LIMIT_REMAINING_HEADER; default: the config's rls.remaining_header, else RateLimit-Remaining)")
	fs.StringVar(&f.rlsHeaderNames[2], "rls-reset-header", "", "`NAME` of the reset header (LIMIT_RESET_HEADER; default: the config's rls.reset_header, else RateLimit-Reset)")
	fs.StringVar(&f.httpTLS.CertFile, "tls-cert", "", "serve HTTPS (HTTP/2 and HTTP/1.1) on --listen with this PEM certificate chain `FILE`, re-read when it changes (with --tls-key)")
	fs.StringVar(&f.httpTLS.KeyFile, "tls-key", "", "PEM private key `FILE` of --tls-cert")
	fs.StringVar(&f.httpTLS.CAFile, "tls-client-ca", "", "with --tls-cert: require HTTPS clients to present a certificate signed by a CA of this PEM `FILE` (mTLS; probes then need one too)")
	fs.StringVar(&f.grpcTLS.CertFile, "grpc-tls-cert", "", "serve the Envoy rate limit service's gRPC over TLS with this PEM certificate chain `FILE`, re-read when it changes (envoy ratelimit's GRPC_SERVER_TLS_CERT; with --grpc-tls-key) (default: the config's rls.tls)")
	fs.StringVar(&f.grpcTLS.KeyFile, "grpc-tls-key", "", "PEM private key `FILE` of --grpc-tls-cert (GRPC_SERVER_TLS_KEY)")
	fs.StringVar(&f.grpcTLS.CAFile, "grpc-tls-client-ca", "", "with --grpc-tls-cert: require gRPC clients (Envoy) to present a certificate signed by a CA of this PEM `FILE` (mTLS; GRPC_CLIENT_TLS_CACERT)")
	fs.StringVar(&f.storeTLS.CAFile, "store-tls-ca", "", "with a rediss:// --store: verify Redis's certificate against the CAs of this PEM `FILE` instead of the system roots (default: the config's store.tls)")
	fs.StringVar(&f.storeTLS.CertFile, "store-tls-cert", "", "with a rediss:// --store: present this PEM client certificate `FILE` to Redis (its tls-auth-clients; with --store-tls-key)")
	fs.StringVar(&f.storeTLS.KeyFile, "store-tls-key", "", "PEM private key `FILE` of --store-tls-cert")
	fs.StringVar(&f.kube.kubeconfig, "kubeconfig", "", "kubeconfig `FILE` for autoscaled services on Kubernetes (else $KUBECONFIG, else the in-cluster config, else ~/.kube/config)")
	fs.BoolVar(&f.kube.leaderElect, "kube-leader-elect", false, "with several tollgate replicas in front of one Deployment: only the holder of a Lease writes replicas; all route")
	fs.StringVar(&f.kube.identity, "kube-identity", os.Getenv("POD_NAME"), "this replica's name in leader election (default $POD_NAME, else the host name)")
	fs.DurationVar(&f.kube.leaseDuration, "kube-lease-duration", 15*time.Second, "with --kube-leader-elect: how long a leader's Lease and a replica's report last unrenewed (a killed leader is replaced about this long after its last renewal; renewals every 2/15 of it)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE` (for performance work)")
}

// serveSynopsis is the head of `tollgate serve --help`.
const serveSynopsis = `tollgate serve [flags]

Run the throttling server: the AWS JSON wire (ECS, Cloud Map) and the
native /v1/take API on one port, with /healthz, /readyz, /metrics and,
with a token, /v1/admin. SIGHUP reloads the config file and the rls
directory; SIGTERM or SIGINT shuts down gracefully (a second one kills).`

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

// options turns the flags into the node's options; the checks here are
// of the flags alone (the node checks them against the config).
func (f serveFlags) options(ctx context.Context, log *slog.Logger) (node.Options, error) {
	token, err := adminToken(ctx, f.adminTokenFile)
	if err != nil {
		return node.Options{}, err
	}
	o := node.Options{
		Listen:           f.listen,
		TLS:              f.httpTLS,
		ConfigPath:       f.configPath,
		Credentials:      f.credentials,
		InstancePorts:    f.instancePorts,
		Logger:           log,
		AdminToken:       token,
		MaxBodyBytes:     f.maxBody,
		MaxBatch:         f.maxBatch,
		MaxInFlightBytes: f.maxInFlight,
		BodyIdleTimeout:  f.bodyIdleTimeout,
		BodyMinRate:      float64(f.bodyMinRate),
		ShutdownTimeout:  f.shutdownTimeout,
		DrainDelay:       f.drainDelay,
		Store:            config.Store{URL: f.store, Timeout: f.storeTimeout, TLS: f.storeTLS},
		DataDir:          f.dataDir.dir,
		DataDirSet:       f.dataDir.set,
		DenyCache:        f.denyCache,
		StorePipelines:   f.storePipelines,
		StoreNodes:       f.storeNodes,
		Memory:           memory.Options{MaxBuckets: f.memMaxBuckets, MaxKeyBytes: f.memMaxKeyBytes},
		BucketCheckpoint: f.bucketCheckpoint,
		RLS: node.RLSOptions{
			ConfigDir:       f.rlsConfig,
			GRPCListen:      f.grpcListen,
			TLS:             f.grpcTLS,
			MergeDomains:    f.rlsMerge.ptr(),
			ShadowMode:      f.rlsShadow.ptr(),
			ResponseHeaders: f.rlsHeaders.ptr(),
			RequireDomain:   f.rlsRequireDomain,
			Watch:           f.rlsWatch,
			LimitHeader:     f.rlsHeaderNames[0],
			RemainingHeader: f.rlsHeaderNames[1],
			ResetHeader:     f.rlsHeaderNames[2],
		},
		Kube:       node.KubeOptions{Kubeconfig: f.kube.kubeconfig, LeaderElect: f.kube.leaderElect, Identity: f.kube.identity, LeaseDuration: f.kube.leaseDuration},
		Supervisor: supervisor(log),
	}
	if !f.dataDir.set {
		o.DataDir = defaultDataDir()
	}
	if f.storeTimeout < 0 {
		return o, fmt.Errorf("--store-timeout %v must be positive", f.storeTimeout)
	}
	if f.storeTimeout > 0 && f.storeTimeout < config.MinStoreTimeout {
		return o, fmt.Errorf("--store-timeout %v is below %v, less than a Redis round trip can take: every decision would be made without Redis, by --store-on-failure; use at least %v (the default is 50ms)", f.storeTimeout, config.MinStoreTimeout, config.MinStoreTimeout)
	}
	switch f.storeOnFailure {
	case "":
	case "local", "fail-local":
		o.Store.OnFailure = "local"
	case "open", "fail-open":
		o.Store.OnFailure = "open"
	case "closed", "fail-closed":
		o.Store.OnFailure = "closed"
	default:
		return o, fmt.Errorf("--store-on-failure %q: want local, open or closed", f.storeOnFailure)
	}
	if f.kube.leaseDuration < 3*time.Second || f.kube.leaseDuration > 10*time.Minute {
		return o, fmt.Errorf("--kube-lease-duration %v must be between 3s and 10m", f.kube.leaseDuration)
	}
	if f.storeNodes < 0 {
		return o, fmt.Errorf("--store-nodes %d must not be negative (0, the default, counts the live nodes)", f.storeNodes)
	}
	// 0 would mean the gateway's default, not "no bound": every body is
	// bounded, so say so rather than serve with another limit than asked.
	if f.maxBody < 1 {
		return o, fmt.Errorf("--max-body %d must be at least 1 (bytes; the default is %d)", f.maxBody, gateway.DefaultMaxBodyBytes)
	}
	if f.maxBatch < 1 {
		return o, fmt.Errorf("--max-batch %d must be at least 1 (the default is %d)", f.maxBatch, gateway.DefaultMaxBatch)
	}
	if f.bodyIdleTimeout < 100*time.Millisecond || f.bodyIdleTimeout > time.Minute {
		return o, fmt.Errorf("--body-idle-timeout %v must be between 100ms and 1m (the default is %v)", f.bodyIdleTimeout, gateway.DefaultBodyIdleTimeout)
	}
	if f.bodyMinRate < 1 {
		return o, fmt.Errorf("--body-min-rate %d must be at least 1 (bytes a second; the default is %d)", f.bodyMinRate, gateway.DefaultBodyMinRate)
	}
	return o, nil
}

// serve builds the node from f and runs it until a SIGTERM or SIGINT
// arrives on sigs (or ctx ends), then shuts it down in two phases. A
// SIGHUP on sigs asks the node for a reload (node.TriggerReload), which
// runs off the signal path. stopSignals is called when shutdown starts,
// so that a second signal kills the process. serve returns only once
// every goroutine it started has stopped.
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
	opts, err := f.options(ctx, log)
	if err != nil {
		return err
	}
	opts.OnShutdown = stopSignals
	n, err := node.New(ctx, opts)
	if err != nil {
		return err
	}
	running, stop := context.WithCancel(ctx)
	defer stop()
	grp, failed := errgroup.WithContext(running)
	grp.Go(func() error {
		defer stop() // a node that stops on its own ends the signal loop
		return n.Run(running)
	})
	grp.Go(func() error { // signals
		for {
			select {
			case <-failed.Done():
				return nil
			case sig := <-sigs:
				if sig == syscall.SIGHUP {
					if n.TriggerReload() {
						log.Info("SIGHUP: reloading config", "config", f.configName())
					} else {
						log.Info("SIGHUP: a reload is already pending", "config", f.configName())
					}
					continue
				}
				log.Info("signal received: shutting down", "signal", sig.String())
				stop()
				return nil
			}
		}
	})
	return grp.Wait()
}

// configName names the config in logs.
func (f serveFlags) configName() string {
	if f.configPath == "" {
		return "built-in presets"
	}
	return f.configPath
}

// executable is the path of this program, found once.
var executable = sync.OnceValues(os.Executable)

// supervisor is the instance supervisor every instance's command is
// started through: this executable's hidden `instance-supervisor`
// command, so that when tollgate is killed every process an instance
// started dies too. Without a path to this executable instances are
// started directly (see process.Options.Supervisor).
func supervisor(log *slog.Logger) []string {
	exe, err := executable()
	if err != nil {
		log.Warn("cannot find tollgate's own executable to supervise instances; starting them directly", "err", err)
		return nil
	}
	return []string{exe, process.SupervisorCommand}
}
