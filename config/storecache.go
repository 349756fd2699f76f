package config

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// StoreCache is the store section's cache section: how much of the
// durable state (the Cloud Map registry, Service Quotas' requests) a
// server holds in memory over its data file or Redis. Each bound is
// read when the stores are built, at start; a zero field means the
// store's default.
//
//	store:
//	  cache:
//	    cloud_map_bytes: 64Mi          # Cloud Map scopes in memory, estimated
//	    service_quotas_requests: 20000 # Service Quotas requests in memory
type StoreCache struct {
	// CloudMapBytes bounds the Cloud Map scopes (an account's state in
	// one region) held in memory, as the registry estimates their size:
	// over the data file (default 64 MiB) and over Redis (default 128
	// MiB). Within [MinCacheCloudMapBytes, MaxCacheCloudMapBytes].
	CloudMapBytes int64
	// ServiceQuotasRequests bounds the Service Quotas requests held in
	// memory over the data file (default 20,000); with Redis they are
	// read from Redis each time. Within [MinCacheServiceQuotasRequests,
	// MaxCacheServiceQuotasRequests].
	ServiceQuotasRequests int
}

// The bounds a config may give store.cache: below the least, a store
// would read its file or Redis for nearly every call (a single Cloud
// Map scope of an account near AWS's quotas is estimated at more than
// a MiB); above the most, a typo (a missing unit, a digit too many) and
// not a choice.
const (
	MinCacheCloudMapBytes         = 1 << 20
	MaxCacheCloudMapBytes         = 64 << 30
	MinCacheServiceQuotasRequests = 100
	MaxCacheServiceQuotasRequests = 10_000_000
)

// storeCache parses the store section's cache section.
func (p *parser) storeCache(n *yaml.Node, path string) StoreCache {
	var c StoreCache
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"cloud_map_bytes": func(_, v *yaml.Node, f string) {
			s, ok := p.str(v, f)
			if !ok {
				return
			}
			b, err := parseSize(s, MinCacheCloudMapBytes, MaxCacheCloudMapBytes)
			if err != nil {
				p.errorf(v, f, "%v: the Cloud Map state held in memory (default 64Mi over the data file, 128Mi over Redis)", err)
				return
			}
			c.CloudMapBytes = b
		},
		"service_quotas_requests": func(_, v *yaml.Node, f string) {
			n, ok := p.integer(v, f)
			if !ok {
				return
			}
			if n < MinCacheServiceQuotasRequests || n > MaxCacheServiceQuotasRequests {
				p.errorf(v, f, "%d is not in [%d, %d]: the Service Quotas requests held in memory over the data file (default 20000)",
					n, MinCacheServiceQuotasRequests, MaxCacheServiceQuotasRequests)
				return
			}
			c.ServiceQuotasRequests = int(n)
		},
	})
	return c
}

// sizeText writes n bytes with the largest power-of-1024 suffix that
// divides it: 1Mi, 64Gi, 1500.
func sizeText(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// sizeError is parseSize's refusal of s.
func sizeError(s string, lo, hi int64) error {
	return fmt.Errorf("%q is not a size in [%s, %s] such as 64Mi", s, sizeText(lo), sizeText(hi))
}
