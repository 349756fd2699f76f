package rls

import (
	"math"
	"sync/atomic"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

// overrideKey is the key label of hits decided under a limit the request
// carried (a descriptor's limit override): its values come from clients, so
// they are not labels.
const overrideKey = "limit_override"

// metrics are the server's Prometheus collectors. Per-rule series are
// labelled by domain and the rule's key path, both from the config, so
// their number is bounded by the config, never by what clients send.
type metrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec

	domainNotFound     prometheus.Counter
	storeErrors        prometheus.Counter
	invalidRequests    prometheus.Counter
	invalidDescriptors prometheus.Counter
	globalShadowMode   prometheus.Counter
	configLoads        *prometheus.CounterVec
	latency            *prometheus.HistogramVec
	// shouldLatency holds latency's series of ShouldRateLimit by code,
	// each looked up on its first call: the hot method skips the vector's
	// label hashing and lookup on every call.
	shouldLatency [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Observer]
}

// observeLatency records one call's latency in seconds by method and code.
func (m *metrics) observeLatency(method string, code codes.Code, seconds float64) {
	if method != rlspb.RateLimitService_ShouldRateLimit_FullMethodName || int(code) >= len(m.shouldLatency) {
		m.latency.WithLabelValues(method, code.String()).Observe(seconds)
		return
	}
	o := m.shouldLatency[code].Load()
	if o == nil {
		obs := m.latency.WithLabelValues(method, code.String())
		o = &obs
		m.shouldLatency[code].Store(o)
	}
	(*o).Observe(seconds)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_rls_rate_limit_" + name, Help: help}, []string{"domain", "key"})
	}
	m := &metrics{
		totalHits:   vec("total_hits", "Hits (hits_addend units) on each rule, as envoy ratelimit's total_hits."),
		overLimit:   vec("over_limit", "Hits over each rule's limit, as envoy ratelimit's over_limit."),
		nearLimit:   vec("near_limit", "Hits within the limit but above the near-limit ratio of it, as envoy ratelimit's near_limit."),
		withinLimit: vec("within_limit", "Hits within each rule's limit, as envoy ratelimit's within_limit."),
		shadowMode:  vec("shadow_mode", "Over-limit hits answered OK because the rule is in shadow mode, as envoy ratelimit's shadow_mode."),
		domainNotFound: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_rls_domain_not_found",
			Help: "Descriptors of requests naming a domain no config file defines.",
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_rls_store_errors",
			Help: "ShouldRateLimit calls the store could not decide (answered UNAVAILABLE).",
		}),
		invalidRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_rls_invalid_requests",
			Help: "ShouldRateLimit calls answered INVALID_ARGUMENT.",
		}),
		invalidDescriptors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_rls_invalid_descriptors",
			Help: "Descriptors that cannot match a rule (no entries, an entry without a key), answered OK as envoy ratelimit answers them.",
		}),
		globalShadowMode: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_rls_global_shadow_mode",
			Help: "Over-limit answers turned OK by the global shadow mode.",
		}),
		configLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_rls_config_loads",
			Help: "Loads of the envoy ratelimit config directory by result (ok, error), as envoy ratelimit's config_load_success and config_load_error.",
		}, []string{"result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_rls_grpc_request_duration_seconds",
			Help:    "gRPC request latency by method and status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"method", "code"}),
	}
	reg.MustRegister(m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode,
		m.domainNotFound, m.storeErrors, m.invalidRequests, m.invalidDescriptors, m.globalShadowMode, m.configLoads, m.latency)
	return m
}

// ruleCounters are one rule's series, made once per config load.
type ruleCounters struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode prometheus.Counter
	// lastShadowLog is when a shadow-mode over-limit decision of this rule
	// was last logged (Unix seconds), so the log has one line per rule per
	// shadowLogEvery.
	lastShadowLog atomic.Int64
}

func (m *metrics) countersFor(domain, key string) *ruleCounters {
	return &ruleCounters{
		totalHits:   m.totalHits.WithLabelValues(domain, key),
		overLimit:   m.overLimit.WithLabelValues(domain, key),
		nearLimit:   m.nearLimit.WithLabelValues(domain, key),
		withinLimit: m.withinLimit.WithLabelValues(domain, key),
		shadowMode:  m.shadowMode.WithLabelValues(domain, key),
	}
}

// count adds one decision to the rule's counters exactly as envoy
// ratelimit's base limiter does for its window counter: used is the
// bucket's use (capacity minus tokens held) before the hits, hits the
// hits_addend, capacity the limit and nearRatio the near-limit ratio. It
// reports whether the hits were over the limit.
func (c *ruleCounters) count(used, hits, capacity uint64, nearRatio float32) (over bool) {
	c.totalHits.Add(float64(hits))
	after := used + hits
	near := uint64(math.Floor(float64(float32(capacity) * nearRatio)))
	if after > capacity {
		if used >= capacity {
			c.overLimit.Add(float64(hits))
		} else {
			c.overLimit.Add(float64(after - capacity))
			c.nearLimit.Add(float64(capacity - max(near, used)))
		}
		return true
	}
	if after > near {
		if used >= near {
			c.nearLimit.Add(float64(hits))
		} else {
			c.nearLimit.Add(float64(after - near))
		}
	}
	c.withinLimit.Add(float64(hits))
	return false
}

// countShadow adds over-limit hits of a shadow-mode rule to shadow_mode.
func (c *ruleCounters) countShadow(used, hits, capacity uint64) {
	if used >= capacity {
		c.shadowMode.Add(float64(hits))
	} else {
		c.shadowMode.Add(float64(used + hits - capacity))
	}
}
