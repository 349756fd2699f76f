package revision

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
)

// Metrics are the Prometheus series of a pool's revisions, labelled by
// service and revision: one set, registered once, shared by every
// revision (Options.Metrics).
type Metrics struct {
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
	rollouts    *prometheus.CounterVec   // service, revision, outcome
}

// NewMetrics registers the revisions' series with reg; nil means a new
// registry that nothing serves.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_instances",
			Help: "Instances of an autoscaled service by state (starting, ready, draining).",
		}, []string{"service", "revision", "state"}),
		recommended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_recommended_instances",
			Help: "The autoscaler's recommended instance count, bounds applied.",
		}, []string{"service", "revision"}),
		driver: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_scaling_driver",
			Help: "1 for the driver (cpu, concurrency, act, none) that set the last recommendation, 0 for the others.",
		}, []string{"service", "revision", "driver"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_pending_requests",
			Help: "Requests waiting in the pending queue for an instance.",
		}, []string{"service", "revision"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_in_flight_requests",
			Help: "Requests running on the service's instances.",
		}, []string{"service", "revision"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_pool_rejected_total",
			Help: "Requests answered 429: every instance busy at max instances for the whole pending wait.",
		}, []string{"service", "revision"}),
		coldStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_pool_cold_start_seconds",
			Help:    "Time from starting an instance to its passing the readiness check.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"service", "revision"}),
		pendingWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_pool_pending_wait_seconds",
			Help:    "Time a queued request waited in the pending queue before it was dispatched, rejected or abandoned.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"service", "revision"}),
		concurrency: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_instance_concurrency",
			Help: "Time-weighted average of an instance's requests in flight over the last second.",
		}, []string{"service", "revision", "instance"}),
		cpu: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_instance_cpu_cores",
			Help: "CPU an instance used over the last second, in cores.",
		}, []string{"service", "revision", "instance"}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_pool_instance_exits_total",
			Help: "Instances that exited without being asked, by reason (crashed, start_failed, oom_killed), or that failed their liveness check and were replaced (unhealthy).",
		}, []string{"service", "revision", "reason"}),
		backoff: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_pool_restart_backoff_seconds",
			Help: "Wait before the next replacement of a crash-looping instance; 0 when healthy.",
		}, []string{"service", "revision"}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_pool_refused_total",
		Help: "Requests answered at once without waiting: reason pending_full (429, max_pending requests already waiting) or start_failed (503, the last start failed and its replacement is in backoff).",
	}, []string{"service", "revision", "reason"})
	m.sharers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tollgate_pool_instance_sharers",
		Help: "tollgate replicas sharing each instance (pods behind several replicas); this replica may send an instance max_concurrency divided by it.",
	}, []string{"service", "revision"})
	m.rollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_pool_rollouts_total",
		Help: "Rollouts of a revision (a new revision, or a traffic change growing its share) by outcome: ready (traffic moved), short (moved with fewer ready instances than its share needs, at the rollout timeout), failed (no instance ready within the rollout timeout: traffic stayed where it was).",
	}, []string{"service", "revision", "outcome"})
	reg.MustRegister(m.instances, m.recommended, m.driver, m.pending, m.inFlight, m.rejected,
		m.coldStart, m.pendingWait, m.concurrency, m.cpu, m.exits, m.backoff, m.refused, m.sharers, m.rollouts)
	return m
}

// series are one revision's series.
type series struct {
	all         *Metrics
	service     string
	revision    string
	rejected    prometheus.Counter
	coldStart   prometheus.Observer
	pendingWait prometheus.Observer
	exits       *prometheus.CounterVec // reason
	backoff     prometheus.Gauge
	refused     *prometheus.CounterVec // reason
	sharers     prometheus.Gauge
	rollouts    *prometheus.CounterVec // outcome
}

// of are the series of service's revision.
func (m *Metrics) of(service, revision string) *series {
	l := prometheus.Labels{"service": service, "revision": revision}
	return &series{
		all:         m,
		service:     service,
		revision:    revision,
		rejected:    m.rejected.With(l),
		coldStart:   m.coldStart.With(l),
		pendingWait: m.pendingWait.With(l),
		exits:       m.exits.MustCurryWith(l),
		backoff:     m.backoff.With(l),
		refused:     m.refused.MustCurryWith(l),
		sharers:     m.sharers.With(l),
		rollouts:    m.rollouts.MustCurryWith(l),
	}
}

var drivers = []autoscale.Driver{autoscale.DriverNone, autoscale.DriverCPU, autoscale.DriverConcurrency, autoscale.DriverACT}

// decision records one Tick's outcome.
func (sm *series) decision(rec autoscale.Recommendation, st autoscale.Stats) {
	m := sm.all
	m.recommended.WithLabelValues(sm.service, sm.revision).Set(float64(rec.Count))
	for _, d := range drivers {
		v := 0.0
		if d == rec.Driver {
			v = 1
		}
		m.driver.WithLabelValues(sm.service, sm.revision, d.String()).Set(v)
	}
	m.instances.WithLabelValues(sm.service, sm.revision, "starting").Set(float64(st.Starting))
	m.instances.WithLabelValues(sm.service, sm.revision, "ready").Set(float64(st.Ready))
	m.instances.WithLabelValues(sm.service, sm.revision, "draining").Set(float64(st.Draining))
	m.pending.WithLabelValues(sm.service, sm.revision).Set(float64(st.Pending))
	m.inFlight.WithLabelValues(sm.service, sm.revision).Set(float64(st.InFlight))
}

// observe records an instance's last second.
func (sm *series) observe(instance string, conc, cpu float64) {
	sm.all.concurrency.WithLabelValues(sm.service, sm.revision, instance).Set(conc)
	sm.all.cpu.WithLabelValues(sm.service, sm.revision, instance).Set(cpu)
}

// forget drops a gone instance's series.
func (sm *series) forget(instance string) {
	sm.all.concurrency.DeleteLabelValues(sm.service, sm.revision, instance)
	sm.all.cpu.DeleteLabelValues(sm.service, sm.revision, instance)
}

// remove drops a stopped revision's series, counters too: a revision
// that has stopped comes back under its name only when a traffic change
// names it again (kept revisions), and its counters begin again then.
func (sm *series) remove() {
	l := prometheus.Labels{"service": sm.service, "revision": sm.revision}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		sm.all.instances, sm.all.recommended, sm.all.driver, sm.all.pending, sm.all.inFlight,
		sm.all.concurrency, sm.all.cpu, sm.all.backoff, sm.all.sharers,
		sm.all.rejected, sm.all.coldStart, sm.all.pendingWait, sm.all.exits, sm.all.refused, sm.all.rollouts,
	} {
		v.DeletePartialMatch(l)
	}
}
