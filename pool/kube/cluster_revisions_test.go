package kube

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/traffic"
)

// addDeployment creates Deployment name at zero replicas and the Service
// of the same name selecting its pods, as a user's CD creates each
// revision's.
func (c *cluster) addDeployment(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	_, err := c.client.AppsV1().Deployments(c.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, ScaledLabel: "true"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "hello", Image: "example.invalid/" + name + ":1",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.client.CoreV1().Services(c.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// replicasOf is Deployment name's spec.replicas.
func (c *cluster) replicasOf(t *testing.T, name string) int32 {
	t.Helper()
	s, err := c.client.AppsV1().Deployments(c.ns).GetScale(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Spec.Replicas
}

// Revisions on two Deployments of a real API server: hello-00001 on
// hello-v1 and hello-00002 on hello-v2 split 90/10, each Deployment
// scaled to its revision's minimum and its pods answering in proportion;
// promoting the latest scales hello-v1 back to zero once drained.
func TestClusterTrafficSplitsOverTwoDeployments(t *testing.T) {
	c := newCluster(t)
	c.addDeployment(t, "hello-v1")
	c.addDeployment(t, "hello-v2")
	si := newStandIns(t)
	runner := func(name string) *Runner {
		return c.runner(t, c.cfg, func(o *Options) {
			o.Target.Deployment = name
			o.Address = si.address
		})
	}
	r1, r2 := runner("hello-v1"), runner("hello-v2")
	p := pool.New(pool.Options{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	eng := autoscale.Config{MinInstances: 1, MaxInstances: 3, InitialColdStart: 5 * time.Second}
	spec := func(name string, r *Runner, traffic ...traffic.Target) []pool.ServiceSpec {
		return []pool.ServiceSpec{{Name: "hello", Runner: r, Template: "kubernetes=" + name, Engine: eng, Traffic: traffic}}
	}
	if err := p.Apply(spec("hello-v1", r1)); err != nil {
		t.Fatal(err)
	}
	runAll(t, r1.Run, r2.Run, p.Run)
	front := httptest.NewServer(p.Handler("hello"))
	t.Cleanup(front.Close)
	get := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), clusterLong)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET: %d %q", resp.StatusCode, b)
		}
		return string(b)
	}
	if body := get(); !strings.HasPrefix(body, "pod hello-v1-") {
		t.Fatalf("hello-00001 answered %q, want a pod of Deployment hello-v1", body)
	}

	if err := p.Apply(spec("hello-v2", r2, traffic.Target{RevisionName: "hello-00001", Percent: 90},
		traffic.Target{LatestRevision: true, Percent: 10})); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, "hello-00002 ready with 10 %", func() bool {
		ts, err := p.Revisions("hello")
		return err == nil && len(ts.Revisions) == 2 && ts.Revisions[1].Ready >= 1 && ts.Revisions[1].Percent == 10
	})
	if n1, n2 := c.replicasOf(t, "hello-v1"), c.replicasOf(t, "hello-v2"); n1 != 1 || n2 != 1 {
		t.Errorf("replicas hello-v1 %d, hello-v2 %d; want each revision's minimum 1", n1, n2)
	}
	const n = 500
	v2 := 0
	for range n {
		body := get()
		switch {
		case strings.HasPrefix(body, "pod hello-v2-"):
			v2++
		case !strings.HasPrefix(body, "pod hello-v1-"):
			t.Fatalf("answered %q, want a pod of hello-v1 or hello-v2", body)
		}
	}
	if share := float64(v2) / n; share < 0.07 || share > 0.13 {
		t.Errorf("hello-v2 took %d of %d requests (%.3f), want 0.10 ± 0.03", v2, n, share)
	}

	if err := p.Apply(spec("hello-v2", r2)); err != nil { // 100 % to the latest
		t.Fatal(err)
	}
	c.waitFor(t, "Deployment hello-v1 scaled to zero after its drain", func() bool { return c.replicasOf(t, "hello-v1") == 0 })
	// The warm rollout may have started hello-00002 up to what the whole
	// service ran (both revisions' instances) before its share grew.
	if n2 := c.replicasOf(t, "hello-v2"); n2 < 1 || n2 > 2 {
		t.Errorf("replicas of hello-v2 = %d, want 1 or 2", n2)
	}
	for range 20 {
		if body := get(); !strings.HasPrefix(body, "pod hello-v2-") {
			t.Fatalf("after promoting hello-00002: %q, want a pod of hello-v2", body)
		}
	}
}
