package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/quota"
)

// storeSettings merges the store overrides over the config file's store
// section; the URL defaults to memory.
func storeSettings(over, file config.Store) config.Store {
	st := file
	if over.URL != "" {
		st.URL = over.URL
	}
	if over.Timeout != 0 {
		st.Timeout = over.Timeout
	}
	if over.OnFailure != "" {
		st.OnFailure = over.OnFailure
	}
	if !over.TLS.IsZero() { // the flags' files replace the file's whole tls section
		st.TLS = over.TLS
	}
	if st.URL == "" {
		st.URL = "memory"
	}
	return st
}

// storeChanges names, as the file spells them, the keys of the store
// section whose values differ between old and next: a reload logs them
// as taking effect on restart, since the store, the registry and
// Service Quotas are built once.
func storeChanges(old, next config.Store) []string {
	var out []string
	add := func(changed bool, key string) {
		if changed {
			out = append(out, "store."+key)
		}
	}
	add(old.URL != next.URL, "url")
	add(old.DataDir != next.DataDir, "data_dir")
	add(old.Timeout != next.Timeout, "timeout")
	add(old.OnFailure != next.OnFailure, "on_failure")
	add(old.TLS != next.TLS, "tls")
	add(old.Cache.CloudMapBytes != next.Cache.CloudMapBytes, "cache.cloud_map_bytes")
	add(old.Cache.ServiceQuotasRequests != next.Cache.ServiceQuotasRequests, "cache.service_quotas_requests")
	return out
}

// openStore returns the limiter the store settings name, a function that
// closes it, and the Redis store to run (nil for memory). tlsConfig makes
// a rediss URL's TLS configuration (nil: go-redis's). nodes is
// --store-nodes: 0 counts the live nodes in Redis.
func openStore(ctx context.Context, st config.Store, tlsConfig func(serverName string) *tls.Config, mem memory.Options, denyCache bool, pipelines, nodes int, log *slog.Logger, reg prometheus.Registerer) (limiter.Limiter, func(), *redisstore.Store, error) {
	if st.URL == "memory" {
		return memory.New(mem), func() {}, nil, nil
	}
	if st.Timeout != 0 && st.Timeout < config.MinStoreTimeout {
		return nil, nil, nil, fmt.Errorf("--store-timeout (store.timeout) %v: %w: it is below %v, less than a Redis round trip can take", st.Timeout, redisstore.ErrTimeoutTooShort, config.MinStoreTimeout)
	}
	policy := redisstore.FailLocal
	if st.OnFailure != "" {
		p, err := redisstore.ParseFailurePolicy(st.OnFailure)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--store-on-failure: %w", err)
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
		Nodes:         nodes,
		Logger:        log,
		TLSConfig:     tlsConfig,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--store: %w", err)
	}
	// A Redis that does not answer here is logged by the store's Run, as
	// an error repeated until it answers. One that does answer is timed:
	// a take timeout below its round trip would leave every decision to
	// the failure policy.
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if store.Ping(pctx) == nil {
		if rtt, err := store.RoundTrip(pctx, 5); err == nil && rtt >= store.Timeout() {
			cancel()
			store.Close()
			return nil, nil, nil, fmt.Errorf("--store-timeout (store.timeout) %v: %w: the shortest of 5 PINGs to %s took %v, so every decision would be made without Redis, by the failure policy; set it to at least a few times the round trip (the default is 50ms)",
				store.Timeout(), redisstore.ErrTimeoutTooShort, redactURL(st.URL), rtt.Round(time.Microsecond))
		}
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
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_store_nodes",
		Help: "The nodes among which a decision made without Redis shares a bucket: --store-nodes, or the live nodes counted in Redis (0 until counted: such decisions deny, and /readyz is not ready).",
	}, func() float64 { return float64(store.Nodes()) }))
	return store, func() { store.Close() }, store, nil
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

// FitsStore checks that the store st names can hold every limit of cfg:
// the Redis script is exact only for buckets that refill within
// redis.MaxWindow. serve refuses a config (at start and on reload) for
// which it fails, and `tollgate check` runs it too.
func FitsStore(cfg *quota.Config, st config.Store) error {
	if st.URL == "" || st.URL == "memory" {
		return nil
	}
	check := func(what string, l bucket.Limit) error {
		if redisstore.CheckWindow(l) != nil {
			return fmt.Errorf("%s: limit %v takes longer than %v to refill: %w", what, l, redisstore.MaxWindow.Round(time.Second), redisstore.ErrUnsupportedLimit)
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
