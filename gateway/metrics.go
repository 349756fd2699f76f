package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/liveview"
)

// metrics are the gateway's Prometheus series.
type metrics struct {
	decisions *prometheus.CounterVec   // service, category, result
	latency   prometheus.Histogram     // one limiter call
	requests  *prometheus.CounterVec   // handler, code, method
	duration  *prometheus.HistogramVec // handler
	reloads   *prometheus.CounterVec   // result
	authFails *prometheus.CounterVec   // code
	delayShed prometheus.Counter       // refusals answered at once: MaxDelayed waited already
}

// bucketCounter is a store that can say how many buckets it holds.
type bucketCounter interface{ Len() int }

func newMetrics(reg prometheus.Registerer, l limiter.Limiter, live *liveview.Recorder) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_decisions_total",
			Help: "Throttling decisions by service, category and result (allowed, throttled, error).",
		}, []string{"service", "category", "result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tollgate_decision_duration_seconds",
			Help:    "Time to decide one request (single take or whole batch), from receipt to decision.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_http_requests_total",
			Help: "HTTP requests by handler, method and status code.",
		}, []string{"handler", "code", "method"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_http_request_duration_seconds",
			Help:    "HTTP request latency by handler.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"handler"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_config_reloads_total",
			Help: "Config reloads by result (ok, error).",
		}, []string{"result"}),
		authFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_auth_failures_total",
			Help: "AWS requests refused for their signature (missing or malformed, or, with --credentials, not verified), by the error code answered; none of them took a token.",
		}, []string{"code"}),
		delayShed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_auth_refusals_undelayed_total",
			Help: "Refusals answered without the failure delay because as many as it allows (4,096) were waiting already.",
		}),
	}
	reg.MustRegister(m.decisions, m.latency, m.requests, m.duration, m.reloads, m.authFails, m.delayShed)
	if bc, ok := l.(bucketCounter); ok {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tollgate_buckets_tracked",
			Help: "Buckets the store holds in memory (those in debt, plus full ones not yet swept).",
		}, func() float64 { return float64(bc.Len()) }))
	}
	if ec, ok := l.(interface{ Evicted() uint64 }); ok {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tollgate_buckets_evicted_total",
			Help: "Buckets in debt the memory store forgot to stay within --memory-max-buckets and --memory-max-key-bytes.",
		}, func() float64 { return float64(ec.Evicted()) }))
	}
	if live != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tollgate_live_hot_dropped_total",
			Help: "Throttles the live view's hottest-buckets summary could not count: its buffers were full.",
		}, func() float64 { return float64(live.Dropped()) }))
	}
	return m
}

// routeMetrics are one route's HTTP series.
type routeMetrics struct {
	requests *prometheus.CounterVec // code, method
	duration prometheus.Observer
}

func (m *metrics) route(handler string) *routeMetrics {
	return &routeMetrics{
		requests: m.requests.MustCurryWith(prometheus.Labels{"handler": handler}),
		duration: m.duration.WithLabelValues(handler),
	}
}

func (rm *routeMetrics) observe(method string, status int, elapsed time.Duration) {
	rm.duration.Observe(elapsed.Seconds())
	rm.requests.WithLabelValues(statusLabel(status), methodLabel(method)).Inc()
}

// statusLabels holds the code label of every status, so counting a request
// allocates nothing.
var statusLabels = func() (s [600]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func statusLabel(code int) string {
	if code >= 0 && code < len(statusLabels) {
		return statusLabels[code]
	}
	return "other"
}

// methodLabel is the method label: lower case for the standard methods (as
// promhttp writes them), "other" for anything else, so a client cannot
// create series at will.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodDelete:
		return "delete"
	case http.MethodHead:
		return "head"
	case http.MethodPatch:
		return "patch"
	case http.MethodOptions:
		return "options"
	}
	return "other"
}

// decisionCounters are one category's decision series, looked up once per
// config rather than once per decision.
type decisionCounters struct {
	allowed, throttled, errored prometheus.Counter
	live                        *liveview.Series // nil without a recorder
}

func (m *metrics) countersFor(service, category string) *decisionCounters {
	return &decisionCounters{
		allowed:   m.decisions.WithLabelValues(service, category, "allowed"),
		throttled: m.decisions.WithLabelValues(service, category, "throttled"),
		errored:   m.decisions.WithLabelValues(service, category, "error"),
	}
}

// observe records one single decision and its latency.
func (m *metrics) observe(c *decisionCounters, allowed bool, err error, elapsed time.Duration) {
	m.latency.Observe(elapsed.Seconds())
	if err != nil {
		c.fail()
		return
	}
	c.count(allowed)
}

// fail counts a request the store could not decide.
func (c *decisionCounters) fail() {
	c.errored.Inc()
	c.live.Error()
}

func (c *decisionCounters) count(allowed bool) {
	c.live.Count(allowed)
	if allowed {
		c.allowed.Inc()
	} else {
		c.throttled.Inc()
	}
}
