package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod's CPU allocation divides its CPU usage into utilisation (SPEC §3:
// with sidecars, an instance's CPU is the sum of its containers' limits),
// in place of the service's cpus, which describes a local process. It is
// read from the pod's spec when a bound pod's allocation is not known yet,
// in the same poll as its CPU usage.

// allocState holds the CPU allocation of each pod seen; guarded by
// Runner.mu.
type allocState struct {
	cores    map[string]float64 // pod name → cores; 0: no CPU limit or request set
	saidSome bool               // "divided by the pods' allocation" was logged
	saidNone bool               // "pods set no CPU limit or request" was logged
	failing  bool               // the last list failed (its warning logged)
}

// podCPUs is the CPU allocation of a pod, in cores: the pod-level limit
// (or request) where the pod sets one; otherwise the sum, over its
// containers and its sidecars (init containers that keep running), of each
// one's CPU limit, or its request where it sets no limit. 0 when none is
// set. Other init containers have finished before the pod serves, so they
// take no part.
//
// k8s.io/component-helpers' PodLimits is not this: it takes the largest of
// the init containers and the running ones, and counts no request where a
// container has no limit.
func podCPUs(spec *corev1.PodSpec) float64 {
	if spec.Resources != nil {
		if c := cpuOf(*spec.Resources); c > 0 {
			return c
		}
	}
	total := 0.0
	for _, c := range spec.Containers {
		total += cpuOf(c.Resources)
	}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			total += cpuOf(c.Resources)
		}
	}
	return total
}

// cpuOf is the CPU limit of rr, or its request when it sets no limit.
func cpuOf(rr corev1.ResourceRequirements) float64 {
	if q, ok := rr.Limits[corev1.ResourceCPU]; ok && !q.IsZero() {
		return q.AsApproximateFloat64()
	}
	if q, ok := rr.Requests[corev1.ResourceCPU]; ok && !q.IsZero() {
		return q.AsApproximateFloat64()
	}
	return 0
}

// readAllocations lists the scaled resource's pods when pod CPU is
// measured (metrics.k8s.io answered) and a bound pod's CPU allocation is
// not known yet, and forgets pods no longer listed. A failing list is
// counted each time and logged once until a list succeeds.
func (r *Runner) readAllocations(ctx context.Context) {
	r.mu.Lock()
	sel, need := r.selector, false
	if !r.cpu.available {
		r.mu.Unlock()
		return
	}
	for _, in := range r.bound {
		if _, ok := r.alloc.cores[in.podName]; in.podName != "" && !ok {
			need = true
		}
	}
	r.mu.Unlock()
	if !need {
		return
	}
	list, err := r.o.Client.CoreV1().Pods(r.o.Target.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.m.apiErrors.WithLabelValues("list_pods").Inc()
		if !r.alloc.failing {
			r.alloc.failing = true
			r.log.Warn("cannot read the pods' CPU limits: utilisation divided by cpus from the config until they are read", "error", err)
		}
		return
	}
	if r.alloc.failing {
		r.alloc.failing = false
		r.log.Info("the pods' CPU limits are read again")
	}
	listed := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		listed[p.Name] = true
		if _, ok := r.alloc.cores[p.Name]; ok {
			continue
		}
		c := podCPUs(&p.Spec)
		r.alloc.cores[p.Name] = c
		switch {
		case c > 0 && !r.alloc.saidSome:
			r.alloc.saidSome = true
			r.log.Info("pod CPU utilisation is divided by the pod's CPU limits (or requests), not by cpus", "pod", p.Name, "cpus", c)
		case c == 0 && !r.alloc.saidNone:
			r.alloc.saidNone = true
			r.log.Info("a pod sets no CPU limit or request: its utilisation is divided by cpus from the config", "pod", p.Name)
		}
	}
	for name := range r.alloc.cores {
		if !listed[name] {
			delete(r.alloc.cores, name)
		}
	}
}

// CPUs is the CPU allocation of the instance's pod (see podCPUs); false
// while it is not bound, its pod has not been read, or the pod sets no CPU
// limit or request.
func (in *instance) CPUs() (float64, bool) {
	r := in.r
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.alloc.cores[in.podName]
	return c, in.podName != "" && c > 0
}
