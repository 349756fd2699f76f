package node

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/config"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/state/bolt"
)

// newRegistry builds the local Cloud Map registry that answers the
// cloudmap service's allowed requests: in memory, or in the Redis the
// store settings name, so that every node shares it. It is built once per
// process, so a SIGHUP reload keeps every registration; without Redis,
// durable (when not nil) keeps it across restarts. store.cache's
// cloud_map_bytes bounds what it holds in memory, over durable or Redis
// (read here, once: a reload that changes it is logged as a store
// change, in effect at the next start). The returned function closes
// its Redis client.
func newRegistry(st config.Store, durable *bolt.DB, tlsConfig func(string) *tls.Config, log *slog.Logger) (*cloudmap.Registry, func(), error) {
	client, closeFn, err := storeClient(st, tlsConfig)
	if err != nil {
		return nil, nil, err
	}
	r, err := cloudmap.New(cloudmap.Options{Logger: log, Redis: client, Durable: durable,
		CacheBytes: st.Cache.CloudMapBytes, RedisCacheBytes: st.Cache.CloudMapBytes})
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return r, closeFn, nil
}

// storeClient opens a Redis client of its own for the Redis the store
// settings name, for a part that keeps its state beside the buckets (the
// Cloud Map registry, Service Quotas); with the memory store it returns a
// nil client. tlsConfig makes a rediss URL's TLS configuration (nil:
// go-redis's). The returned function closes it.
func storeClient(st config.Store, tlsConfig func(string) *tls.Config) (goredis.UniversalClient, func(), error) {
	if st.URL == "memory" {
		return nil, func() {}, nil
	}
	client, err := redisstore.NewClientTLS(st.URL, tlsConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("--store: %w", err)
	}
	return client, func() { client.Close() }, nil
}
