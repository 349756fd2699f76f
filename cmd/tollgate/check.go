package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/tlsfiles"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/node"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/rls"
	"github.com/tollgate/tollgate/servicequotas"
)

func checkCommand() command {
	return command{
		summary: "validate a quota config (or show a preset) and print its table",
		run:     runCheck,
	}
}

// checkSynopsis is the head of `tollgate check --help`.
const checkSynopsis = `tollgate check [--rls-config DIR] FILE | tollgate check --rls-config DIR | tollgate check --preset NAME

Validate a config file as serve loads it (with the same size and time
bounds, envoy ratelimit's directory its rls.config_dir names and the
TLS files its rls.tls and store.tls name) and print its table; or validate an envoy ratelimit config directory alone;
or print a built-in service's table.`

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check")
	preset := fs.String("preset", "", "print a built-in service instead of a file: "+strings.Join(quota.PresetNames(), ", "))
	rlsDir := fs.String("rls-config", "", "also validate envoy ratelimit's config `DIR` (as serve --rls-config loads it; default: the config's rls.config_dir)")
	if code, ok := parseFlags(fs, checkSynopsis, args, stdout, stderr); !ok {
		return code
	}
	var cfg *config.Config
	switch {
	case *rlsDir != "" && *preset == "" && fs.NArg() == 0:
		return checkRLS(stdout, stderr, *rlsDir, config.RLS{}, config.Store{})
	case *preset != "" && fs.NArg() == 0:
		s, err := quota.Preset(*preset)
		if err != nil {
			return usageError(stderr, "check", "%v", err)
		}
		cfg = &config.Config{}
		if cfg.Quota, err = quota.NewConfig([]*quota.Service{s}, nil, nil); err != nil {
			fmt.Fprintln(stderr, "tollgate check:", err)
			return 1
		}
	case *preset == "" && fs.NArg() == 1:
		var err error
		if cfg, err = config.Load(context.Background(), fs.Arg(0)); err != nil {
			fmt.Fprintln(stderr, "tollgate check:", err)
			return 1
		}
		// The file's store, as serve uses it unless --store says otherwise.
		if err := node.FitsStore(cfg.Quota, cfg.Store); err != nil {
			fmt.Fprintf(stderr, "tollgate check: %s: store: %v\n", fs.Arg(0), err)
			return 1
		}
		// The TLS files the file names, read and checked as serve reads them.
		for _, t := range []struct {
			field string
			tls   config.TLS
		}{{"rls.tls", cfg.RLS.TLS}, {"store.tls", cfg.Store.TLS}} {
			if t.tls.IsZero() {
				continue
			}
			if _, err := tlsfiles.Load(tlsfiles.Files{Cert: t.tls.CertFile, Key: t.tls.KeyFile, CA: t.tls.CAFile}, tlsfiles.Options{}); err != nil {
				fmt.Fprintf(stderr, "tollgate check: %s: %s: %v\n", fs.Arg(0), t.field, err)
				return 1
			}
		}
	case *preset != "":
		return usageError(stderr, "check", "give a FILE (and --rls-config) or --preset, not both")
	case fs.NArg() == 0:
		return usageError(stderr, "check", "give a config FILE, or --preset NAME (%s)", strings.Join(quota.PresetNames(), ", "))
	default:
		return usageError(stderr, "check", "one config FILE at a time, not %d", fs.NArg())
	}
	if err := cfg.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, "tollgate check:", err)
		return 1
	}
	if err := servicequotas.WriteTable(stdout, cfg.Quota, node.QuotaPolicy(cfg.ServiceQuotas)); err != nil {
		fmt.Fprintln(stderr, "tollgate check:", err)
		return 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if dir := *rlsDir; dir != "" || cfg.RLS.ConfigDir != "" {
		return checkRLS(stdout, stderr, dir, cfg.RLS, cfg.Store)
	}
	return 0
}

// checkRLS validates envoy ratelimit's config directory as serve loads
// it: dir (--rls-config) or else the config's rls.config_dir, with the
// config's merge_domains, and the Redis store's longest window when the
// config's store is Redis (serve's --store can still change that).
func checkRLS(stdout, stderr io.Writer, dir string, section config.RLS, st config.Store) int {
	source := "--rls-config " + dir
	if dir == "" {
		dir, source = section.ConfigDir, "rls.config_dir "+section.ConfigDir
	}
	opts := rls.LoadOptions{MergeDomains: section.MergeDomains}
	if st.URL != "" && st.URL != "memory" {
		opts.MaxWindow = redisstore.MaxWindow
	}
	cfg, err := rls.Load(dir, opts)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate check: %s: %v\n", source, err)
		return 1
	}
	fmt.Fprintf(stdout, "\nenvoy ratelimit config %s: %d domains, %d rules, %d files\n", dir, len(cfg.Domains()), len(cfg.Rules()), len(cfg.Files()))
	return 0
}
