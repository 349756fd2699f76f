package kube

// A Deployment whose pod template asks for nvidia.com/gpu runs a GPU
// service: the pool keeps its idle instances 10 minutes at most, not 15
// (SPEC §3; autoscale.Config.GPUs, as `gpu: N` does for processes). The
// template is read when Run starts and again at every resync, so a
// template changed to ask for a GPU (or no longer) takes effect within
// Options.Resync.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/runner"
)

// GPUResource is the extended resource of NVIDIA's device plugin: a pod
// template that requests or limits it in any container makes a GPU
// service.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

var _ runner.GPURunner = (*Runner)(nil)

// GPUs implements runner.GPURunner: the GPUs one pod of the Deployment's
// template asks for, 0 when none or not read yet.
func (r *Runner) GPUs() int { return int(r.gpus.Load()) }

// podGPUs is the GPUs a pod of spec holds while it serves: the sum, over
// its containers and its sidecars (init containers that keep running),
// of each one's nvidia.com/gpu limit, or its request where it sets no
// limit (an extended resource's request, when set, equals its limit).
// It is at most autoscale.MaxGPUs: the count only decides that the
// service is a GPU service.
func podGPUs(spec *corev1.PodSpec) int {
	total := int64(0)
	add := func(rr corev1.ResourceRequirements) {
		q, ok := rr.Limits[GPUResource]
		if !ok || q.IsZero() {
			q, ok = rr.Requests[GPUResource]
		}
		if ok && q.Sign() > 0 {
			total += min(q.Value(), autoscale.MaxGPUs) // Value rounds a fraction up
		}
	}
	for _, c := range spec.Containers {
		add(c.Resources)
	}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c.Resources)
		}
	}
	return int(min(total, autoscale.MaxGPUs))
}

// setTemplateGPUs takes the GPUs of the scaled Deployment's pod template,
// and logs a change.
func (r *Runner) setTemplateGPUs(spec *corev1.PodSpec) {
	n := int64(podGPUs(spec))
	if old := r.gpus.Swap(n); old != n {
		if n > 0 {
			r.log.Info("the Deployment's pods ask for "+string(GPUResource)+": a GPU service, idle instances kept 10 minutes at most", "gpus", n)
		} else if old > 0 {
			r.log.Info("the Deployment's pods no longer ask for " + string(GPUResource))
		}
	}
}

// watchTemplate rereads the Deployment's pod template every resync until
// ctx ends, for its GPUs. A failed read keeps what was read last.
func (r *Runner) watchTemplate(ctx context.Context) {
	t := time.NewTicker(r.o.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d, err := r.o.Client.AppsV1().Deployments(r.o.Target.Namespace).Get(ctx, r.o.Target.Deployment, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() == nil {
				r.m.apiErrors.WithLabelValues("get_deployment").Inc()
			}
			continue
		}
		r.setTemplateGPUs(&d.Spec.Template.Spec)
	}
}
