package kube

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
)

func TestCPUFromMetricsAPI(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	served := false
	base := time.Now().Add(-time.Hour)
	n := 0
	mc := metricsfake.NewSimpleClientset()
	mc.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if !served {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}, "")
		}
		n++ // each read: 10 s later, 0.5 cores
		return true, &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{{
			ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default", Labels: map[string]string{"app": "hello"}},
			Timestamp:  metav1.NewTime(base.Add(time.Duration(n) * 10 * time.Second)),
			Window:     metav1.Duration{Duration: 10 * time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}},
		}}}, nil
	})
	e := newEnv(t, func(o *Options) { o.Metrics = mc; o.MetricsInterval = 20 * time.Millisecond })
	e.run()
	a := start(t, e.r, "a")
	e.setSlice("hello-1", pod{name: "p1", ip: "10.0.0.1"})
	ready(t, a)
	eventually(t, "a metrics read of an API not served", func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		return e.r.cpu.said
	})
	if _, ok := a.CPUTime(); ok {
		t.Error("CPUTime measurable while metrics.k8s.io is not served")
	}
	mu.Lock()
	served = true
	mu.Unlock()
	var first time.Duration
	eventually(t, "CPU time measured", func() bool {
		v, ok := a.CPUTime()
		first = v
		return ok
	})
	// The samples are 10 s apart at 0.5 cores: 5 s of CPU time per read,
	// carried forward past the last one by at most two intervals.
	eventually(t, "CPU time grows by the usage", func() bool {
		v, ok := a.CPUTime()
		return ok && v-first >= 20*time.Second
	})
	prev := time.Duration(0)
	for range 50 {
		v, _ := a.CPUTime()
		if v < prev {
			t.Fatalf("CPUTime went back from %v to %v", prev, v)
		}
		prev = v
	}
}

func TestCPUSampleIntegration(t *testing.T) {
	t.Parallel()
	c := cpuState{samples: map[string]*cpuSample{}}
	t0 := time.Unix(1000, 0)
	pm := func(at time.Time, cpu string) metricsv1beta1.PodMetrics {
		return metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Timestamp: metav1.NewTime(at),
			Containers: []metricsv1beta1.ContainerMetrics{
				{Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
				{Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}}
	}
	c.update([]metricsv1beta1.PodMetrics{pm(t0, "250m")})
	c.update([]metricsv1beta1.PodMetrics{pm(t0.Add(15*time.Second), "1")})
	c.update([]metricsv1beta1.PodMetrics{pm(t0.Add(15*time.Second), "1")}) // same sample again
	s := c.samples["p"]
	if s.acc != 30*time.Second { // 2 containers × 1 core × 15 s
		t.Errorf("acc = %v, want 30s", s.acc)
	}
	if got := s.cpuAt(t0.Add(20*time.Second), time.Minute); got != 40*time.Second {
		t.Errorf("cpuAt(+5s) = %v, want 40s", got)
	}
	if got := s.cpuAt(t0.Add(time.Hour), 30*time.Second); got != 90*time.Second {
		t.Errorf("cpuAt far ahead = %v, want capped at 90s", got)
	}
	c.update(nil)
	if len(c.samples) != 0 {
		t.Error("a pod no longer listed is kept")
	}
}
