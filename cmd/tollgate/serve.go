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
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
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
	cpuProfile      string
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
	fs.StringVar(&f.store, "store", "memory", "where bucket state lives: memory")
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
	if err := serve(ctx, f, hup, stderr); err != nil {
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

// openStore returns the limiter named by --store.
func openStore(spec string, log *slog.Logger, reg prometheus.Registerer) (limiter.Limiter, func(), error) {
	if spec == "memory" || spec == "" {
		return memory.New(memory.Options{}), func() {}, nil
	}
	return nil, nil, fmt.Errorf("--store %q: want memory", spec)
}

// serve runs the server until ctx ends, then shuts down gracefully.
// Each value on hup reloads the config.
func serve(ctx context.Context, f serveFlags, hup <-chan os.Signal, logOut io.Writer) error {
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
	store, closeStore, err := openStore(f.store, log, reg)
	if err != nil {
		return err
	}
	defer closeStore()
	g, err := gateway.New(gateway.Options{
		Config:       cfg,
		Limiter:      store,
		Logger:       log,
		Registry:     reg,
		AdminToken:   token,
		Reload:       func() (*quota.Config, error) { return loadConfig(f.configPath) },
		MaxBodyBytes: f.maxBody,
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
	log.Info("listening", "addr", ln.Addr().String(), "config", configName, "store", f.store, "admin", token != "")

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
			log.Info("shutting down: finishing in-flight requests", "timeout", f.shutdownTimeout)
			g.SetReady(false)
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
