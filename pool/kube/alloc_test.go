package kube

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
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
	t.Parallel()
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
	t.Parallel()
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

// syncBuffer is a log sink safe for the runner's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestInstanceCPUsAfterAFailedPodList: while the pod list is refused (a
// Role without list on pods) the instance reports no allocation, so the
// pool divides by cpus; each failure is counted and logged once. Once the
// list is allowed the pod's limits are read, and a pod gone from the list
// is forgotten at the next read.
func TestInstanceCPUsAfterAFailedPodList(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, func(o *Options) {
		o.Metrics = metricsfake.NewSimpleClientset()
		o.MetricsInterval = 20 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	var mu sync.Mutex
	forbidden, lists := true, 0
	e.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lists++
		if forbidden {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
		}
		return false, nil, nil // the tracker answers
	})
	ctx := context.Background()
	for _, name := range []string{"p1", "p2"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": "hello"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: cpuRes("750m", "")}}}}
		if _, err := e.client.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.run()
	a := start(t, e.r, "a")
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	ready(t, a)
	eventually(t, "three refused pod lists counted", func() bool {
		return testutil.ToFloat64(e.r.m.apiErrors.WithLabelValues("list_pods")) >= 3
	})
	if c, ok := a.(pool.CPUAllocator).CPUs(); ok {
		t.Errorf("CPUs() = %v while the pod list is refused", c)
	}
	if n := strings.Count(logs.String(), "cannot read the pods' CPU limits"); n != 1 {
		t.Errorf("the refused list logged %d times, want once:\n%s", n, logs.String())
	}
	mu.Lock()
	forbidden = false
	mu.Unlock()
	eventually(t, "the pod's limits read once allowed", func() bool {
		c, ok := a.(pool.CPUAllocator).CPUs()
		return ok && c == 0.75
	})
	if !strings.Contains(logs.String(), "the pods' CPU limits are read again") {
		t.Error("the recovery is not logged")
	}
	mu.Lock()
	before := lists
	mu.Unlock()
	time.Sleep(10 * 20 * time.Millisecond) // ten intervals: no unread bound pod, so no list
	mu.Lock()
	after := lists
	mu.Unlock()
	if after != before {
		t.Errorf("%d pod lists with every bound pod's limits known", after-before)
	}

	// p1 leaves and a new pod p3 is bound: the list that reads p3
	// forgets p1.
	if err := e.client.CoreV1().Pods(e.ns).Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p3 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p3", Namespace: e.ns, Labels: map[string]string{"app": "hello"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: cpuRes("", "2")}}}}
	if _, err := e.client.CoreV1().Pods(e.ns).Create(ctx, p3, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := start(t, e.r, "b")
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"}, pod{name: "p3", ip: "10.0.0.3"}) // p1 comes back unlabelled: not the scaled pods
	ready(t, b)
	eventually(t, "p3 read and p1 forgotten", func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		_, p1 := e.r.alloc.cores["p1"]
		return e.r.alloc.cores["p3"] == 2 && !p1
	})
}

// TestNoPodListWithoutPodMetrics: with metrics.k8s.io not served, pod CPU
// is not measured, so the pods are never listed for their CPU limits.
func TestNoPodListWithoutPodMetrics(t *testing.T) {
	t.Parallel()
	mc := metricsfake.NewSimpleClientset()
	var mu sync.Mutex
	reads := 0
	mc.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}, "")
	})
	e := newEnv(t, func(o *Options) { o.Metrics = mc; o.MetricsInterval = 20 * time.Millisecond })
	lists := 0
	e.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lists++
		return false, nil, nil
	})
	e.run()
	a := start(t, e.r, "a")
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	ready(t, a)
	eventually(t, "three metrics reads of an API not served", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return reads >= 3
	})
	// Not served is said once, not counted as an API error on every poll.
	if n := testutil.ToFloat64(e.r.m.apiErrors.WithLabelValues("list_pod_metrics")); n != 0 {
		t.Errorf("%v list_pod_metrics errors counted while metrics.k8s.io is not served", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if lists != 0 {
		t.Errorf("%d pod lists while pod CPU is not measured", lists)
	}
}
