package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	"k8s.io/utils/ptr"

	"github.com/tollgate/tollgate/pool"
)

func cpuRes(limit, request string) corev1.ResourceRequirements {
	rr := corev1.ResourceRequirements{}
	if limit != "" {
		rr.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)}
	}
	if request != "" {
		rr.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(request)}
	}
	return rr
}

func TestPodCPUs(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		want float64
	}{
		{"one container's limit", corev1.PodSpec{Containers: []corev1.Container{{Resources: cpuRes("2", "500m")}}}, 2},
		{"a request where no limit is set", corev1.PodSpec{Containers: []corev1.Container{{Resources: cpuRes("", "250m")}}}, 0.25},
		{"app and sidecar: the sum", corev1.PodSpec{Containers: []corev1.Container{
			{Resources: cpuRes("1", "")}, {Resources: cpuRes("", "500m")}}}, 1.5},
		{"a native sidecar counts, a finished init container does not", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: cpuRes("4", "")}, {RestartPolicy: always, Resources: cpuRes("250m", "")}},
			Containers:     []corev1.Container{{Resources: cpuRes("1", "")}}}, 1.25},
		{"pod-level resources win", corev1.PodSpec{Resources: ptr.To(cpuRes("3", "")),
			Containers: []corev1.Container{{Resources: cpuRes("1", "")}}}, 3},
		{"nothing set", corev1.PodSpec{Containers: []corev1.Container{{}}}, 0},
	} {
		if got := podCPUs(&c.spec); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestInstanceCPUsFromItsPod: a bound instance's CPU allocation is its
// pod's containers' limits (an app of 1.5 cores and a sidecar of 0.5), not
// the service's cpus; another pod without any CPU setting reports none, so
// the pool keeps dividing by cpus for it.
func TestInstanceCPUsFromItsPod(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Metrics = metricsfake.NewSimpleClientset()
		o.MetricsInterval = 20 * time.Millisecond
	})
	ctx := context.Background()
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: e.ns, Labels: map[string]string{"app": "hello"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: cpuRes("1500m", "1")}, {Name: "proxy", Resources: cpuRes("", "500m")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: e.ns, Labels: map[string]string{"app": "hello"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}},
	} {
		if _, err := e.client.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.run()
	a := start(t, e.r, "a")
	if _, ok := a.(pool.CPUAllocator).CPUs(); ok {
		t.Error("an unbound instance reports a CPU allocation")
	}
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	ready(t, a)
	var got float64
	eventually(t, "the pod's CPU allocation read", func() bool {
		c, ok := a.(pool.CPUAllocator).CPUs()
		got = c
		return ok
	})
	if got != 2 {
		t.Fatalf("CPUs() = %v, want 2 (1.5 limit + 0.5 request)", got)
	}
	b := start(t, e.r, "b")
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p2", ip: "10.0.0.2"})
	ready(t, b)
	eventually(t, "the second pod read", func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		_, ok := e.r.alloc.cores["p2"]
		return ok
	})
	if c, ok := b.(pool.CPUAllocator).CPUs(); ok {
		t.Errorf("a pod with no CPU limit or request reports %v cores", c)
	}
}
