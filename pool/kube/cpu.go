package kube

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// cpuState holds what metrics.k8s.io said of each pod; guarded by
// Runner.mu.
type cpuState struct {
	available bool // the last read succeeded
	said      bool // availability was logged
	samples   map[string]*cpuSample
}

// cpuSample integrates a pod's CPU usage (a rate, in cores, averaged over
// the metrics window) into CPU time.
type cpuSample struct {
	at    time.Time     // the last sample's timestamp
	usage float64       // cores at the last sample
	acc   time.Duration // CPU time up to at
}

// pollCPU reads pod metrics, and the CPU allocation of pods not yet seen,
// every MetricsInterval until ctx ends.
func (r *Runner) pollCPU(ctx context.Context) {
	t := time.NewTicker(r.o.MetricsInterval)
	defer t.Stop()
	for {
		r.readCPU(ctx)
		r.readAllocations(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Runner) readCPU(ctx context.Context) {
	r.mu.Lock()
	sel := r.selector
	r.mu.Unlock()
	list, err := r.o.Metrics.MetricsV1beta1().PodMetricses(r.o.Target.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		// An API that is not served (no metrics-server: 404) is said once
		// and is no error on every poll; a served API failing is one.
		if !apierrors.IsNotFound(err) {
			r.m.apiErrors.WithLabelValues("list_pod_metrics").Inc()
		}
		was, said := r.cpu.available, r.cpu.said
		r.cpu.available, r.cpu.said = false, true
		switch {
		case !said:
			r.log.Info("metrics.k8s.io not available: pod CPU not measured, scaling on concurrency and ACT only", "error", err)
		case was:
			r.log.Warn("metrics.k8s.io stopped answering: pod CPU not measured until it does", "error", err)
		}
		return
	}
	if !r.cpu.available {
		r.log.Info("pod CPU read from metrics.k8s.io", "interval", r.o.MetricsInterval)
	}
	r.cpu.available, r.cpu.said = true, true
	r.cpu.update(list.Items)
}

// update folds one list of pod metrics into the samples; pods no longer
// listed are forgotten.
func (c *cpuState) update(items []metricsv1beta1.PodMetrics) {
	seen := make(map[string]bool, len(items))
	for _, pm := range items {
		seen[pm.Name] = true
		var cores float64
		for _, ct := range pm.Containers {
			cores += ct.Usage.Cpu().AsApproximateFloat64()
		}
		at := pm.Timestamp.Time
		s := c.samples[pm.Name]
		if s == nil {
			c.samples[pm.Name] = &cpuSample{at: at, usage: cores}
			continue
		}
		if at.After(s.at) {
			s.acc += time.Duration(cores * float64(at.Sub(s.at)))
			s.at, s.usage = at, cores
		}
	}
	for name := range c.samples {
		if !seen[name] {
			delete(c.samples, name)
		}
	}
}

// at is the pod's CPU time at now: up to the last sample, then its usage
// carried forward for at most two intervals.
func (s *cpuSample) cpuAt(now time.Time, limit time.Duration) time.Duration {
	ahead := min(max(now.Sub(s.at), 0), limit)
	return s.acc + time.Duration(s.usage*float64(ahead))
}

// CPUTime is the pod's CPU time as metrics.k8s.io reports it (integrated
// from its usage samples since tollgate first saw the pod), never
// decreasing; false while metrics.k8s.io is not available or has no
// sample of the pod yet.
func (in *instance) CPUTime() (time.Duration, bool) {
	r := in.r
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.cpu.samples[in.podName]
	if in.podName == "" || !r.cpu.available || s == nil {
		return in.cpuLast, in.cpuLast > 0 && in.state == stateDone
	}
	v := max(s.cpuAt(time.Now(), 2*r.o.MetricsInterval), in.cpuLast)
	in.cpuLast = v
	return v, true
}
