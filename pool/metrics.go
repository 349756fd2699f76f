package pool

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
)

// metrics are the pool's Prometheus series, labelled by service.
type metrics struct {
	instances   *prometheus.GaugeVec     // service, state
	recommended *prometheus.GaugeVec     // service
	driver      *prometheus.GaugeVec     // service, driver: 1 for the winner
	pending     *prometheus.GaugeVec     // service
	inFlight    *prometheus.GaugeVec     // service
	rejected    *prometheus.CounterVec   // service
	coldStart   *prometheus.HistogramVec // service
	pendingWait *prometheus.HistogramVec // service
	concurrency *prometheus.GaugeVec     // service, instance
	cpu         *prometheus.GaugeVec     // service, instance
	exits       *prometheus.CounterVec   // service, reason
	backoff     *prometheus.GaugeVec     // service
	refused     *prometheus.CounterVec   // service, reason
	sharers     *prometheus.GaugeVec     // service
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_instances",
			Help: "Instances of an autoscaled service by state (starting, ready, draining).",
		}, []string{"service", "state"}),
		recommended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_recommended_instances",
			Help: "The autoscaler's recommended instance count, bounds applied.",
		}, []string{"service"}),
		driver: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_scaling_driver",
			Help: "1 for the driver (cpu, concurrency, act, none) that set the last recommendation, 0 for the others.",
		}, []string{"service", "driver"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_pending_requests",
			Help: "Requests waiting in the pending queue for an instance.",
		}, []string{"service"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_in_flight_requests",
			Help: "Requests running on the service's instances.",
		}, []string{"service"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_pool_rejected_total",
			Help: "Requests answered 429: every instance busy at max instances for the whole pending wait.",
		}, []string{"service"}),
		coldStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_pool_cold_start_seconds",
			Help:    "Time from starting an instance to its passing the readiness check.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"service"}),
		pendingWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_pool_pending_wait_seconds",
			Help:    "Time a queued request waited in the pending queue before it was dispatched, rejected or abandoned.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"service"}),
		concurrency: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_instance_concurrency",
			Help: "Time-weighted average of an instance's requests in flight over the last second.",
		}, []string{"service", "instance"}),
		cpu: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_instance_cpu_cores",
			Help: "CPU an instance used over the last second, in cores.",
		}, []string{"service", "instance"}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_pool_instance_exits_total",
			Help: "Instances that exited without being asked, by reason (crashed, start_failed, oom_killed).",
		}, []string{"service", "reason"}),
		backoff: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_restart_backoff_seconds",
			Help: "Wait before the next replacement of a crash-looping instance; 0 when healthy.",
		}, []string{"service"}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_pool_refused_total",
		Help: "Requests answered at once without waiting: reason pending_full (429, max_pending requests already waiting) or start_failed (503, the last start failed and its replacement is in backoff).",
	}, []string{"service", "reason"})
	m.sharers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tollgate_pool_instance_sharers",
		Help: "tollgate replicas sharing each instance (pods behind several replicas); this replica may send an instance max_concurrency divided by it.",
	}, []string{"service"})
	reg.MustRegister(m.instances, m.recommended, m.driver, m.pending, m.inFlight, m.rejected,
		m.coldStart, m.pendingWait, m.concurrency, m.cpu, m.exits, m.backoff, m.refused, m.sharers)
	return m
}

// serviceMetrics are one service's series.
type serviceMetrics struct {
	all         *metrics
	service     string
	rejected    prometheus.Counter
	coldStart   prometheus.Observer
	pendingWait prometheus.Observer
	exits       *prometheus.CounterVec // reason
	backoff     prometheus.Gauge
	refused     *prometheus.CounterVec // reason
	sharers     prometheus.Gauge
}

func (m *metrics) service(name string) *serviceMetrics {
	l := prometheus.Labels{"service": name}
	return &serviceMetrics{
		all:         m,
		service:     name,
		rejected:    m.rejected.With(l),
		coldStart:   m.coldStart.With(l),
		pendingWait: m.pendingWait.With(l),
		exits:       m.exits.MustCurryWith(l),
		backoff:     m.backoff.With(l),
		refused:     m.refused.MustCurryWith(l),
		sharers:     m.sharers.With(l),
	}
}

var drivers = []autoscale.Driver{autoscale.DriverNone, autoscale.DriverCPU, autoscale.DriverConcurrency, autoscale.DriverACT}

// decision records one Tick's outcome.
func (sm *serviceMetrics) decision(rec autoscale.Recommendation, st autoscale.Stats) {
	m := sm.all
	m.recommended.WithLabelValues(sm.service).Set(float64(rec.Count))
	for _, d := range drivers {
		v := 0.0
		if d == rec.Driver {
			v = 1
		}
		m.driver.WithLabelValues(sm.service, d.String()).Set(v)
	}
	m.instances.WithLabelValues(sm.service, "starting").Set(float64(st.Starting))
	m.instances.WithLabelValues(sm.service, "ready").Set(float64(st.Ready))
	m.instances.WithLabelValues(sm.service, "draining").Set(float64(st.Draining))
	m.pending.WithLabelValues(sm.service).Set(float64(st.Pending))
	m.inFlight.WithLabelValues(sm.service).Set(float64(st.InFlight))
}

// observe records an instance's last second.
func (sm *serviceMetrics) observe(instance string, conc, cpu float64) {
	sm.all.concurrency.WithLabelValues(sm.service, instance).Set(conc)
	sm.all.cpu.WithLabelValues(sm.service, instance).Set(cpu)
}

// forget drops a gone instance's series.
func (sm *serviceMetrics) forget(instance string) {
	sm.all.concurrency.DeleteLabelValues(sm.service, instance)
	sm.all.cpu.DeleteLabelValues(sm.service, instance)
}

// remove drops a removed service's series.
func (sm *serviceMetrics) remove() {
	l := prometheus.Labels{"service": sm.service}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		sm.all.instances, sm.all.recommended, sm.all.driver, sm.all.pending, sm.all.inFlight,
		sm.all.concurrency, sm.all.cpu, sm.all.backoff,
	} {
		v.DeletePartialMatch(l)
	}
}
