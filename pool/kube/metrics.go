package kube

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are one target's series of the runner's metric vectors.
type metrics struct {
	desired, reported, ready, leader prometheus.Gauge
	writes                           prometheus.Counter
	apiErrors                        *prometheus.CounterVec

	// Shared mode (leader election): the report Lease.
	peers, oldestReport prometheus.Gauge
	sent, received      prometheus.Counter
	decided             prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, target string) *metrics {
	l := prometheus.Labels{"target": target}
	gauge := func(name, help string) prometheus.Gauge {
		v := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"target"}))
		return v.With(l)
	}
	writes := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_kube_scale_writes_total",
		Help: "Replica counts written through the scale subresource.",
	}, []string{"target"}))
	errs := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_kube_api_errors_total",
		Help: "Kubernetes API calls that failed, by operation (conflicts included).",
	}, []string{"target", "op"}))
	counter := func(name, help string) prometheus.Counter {
		v := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"target"}))
		return v.With(l)
	}
	return &metrics{
		peers:        gauge("tollgate_kube_replica_peers", "Other tollgate replicas sharing the Deployment whose report is fresh (heard from within the lease duration)."),
		oldestReport: gauge("tollgate_kube_replica_report_oldest_age_seconds", "Age of the oldest fresh report of another replica, on this replica's clock."),
		sent:         counter("tollgate_kube_replica_reports_sent_total", "This replica's reports written to the report Lease."),
		received:     counter("tollgate_kube_replica_reports_received_total", "Changed reports of other replicas read from the report Lease."),
		decided:      gauge("tollgate_kube_service_count", "Leading with several replicas: the instances the service needs from every replica's measured load together."),
		desired:      gauge("tollgate_kube_replicas_desired", "Replicas tollgate asks the Deployment for (its live instances)."),
		reported:     gauge("tollgate_kube_replicas_reported", "Replicas the scale subresource reports (status.replicas)."),
		ready:        gauge("tollgate_kube_ready_pods", "Ready endpoints in the Service's EndpointSlices."),
		leader:       gauge("tollgate_kube_leader", "1 while this tollgate may write replicas (leader, or no election)."),
		writes:       writes.With(l),
		apiErrors:    errs.MustCurryWith(l),
	}
}

// register registers c, or returns the collector already registered in
// its place (several runners share one registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
		panic(err) // only a programming error: names and labels are constants
	}
	return c
}
