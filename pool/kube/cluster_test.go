package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
)

// These tests run against a real API server: ../shared/k8s/start-cluster.sh
// (kwok makes pods Ready; no container runs). They skip unless
// TOLLGATE_KUBE=1 and KUBECONFIG names a reachable control plane.

// clusterLong is how long a step against the control plane may take.
const clusterLong = 90 * time.Second

type cluster struct {
	cfg    *rest.Config
	client kubernetes.Interface
	ns     string
}

// controlPlane is the API server of KUBECONFIG and a namespace of the
// test's own, named prefix + a random suffix and deleted when the test
// ends; the test skips unless TOLLGATE_KUBE=1 and the server answers.
func controlPlane(t *testing.T, prefix string) (*rest.Config, kubernetes.Interface, string) {
	t.Helper()
	if os.Getenv("TOLLGATE_KUBE") != "1" {
		t.Skip("set TOLLGATE_KUBE=1 and KUBECONFIG (../shared/k8s/start-cluster.sh) to run against a real API server")
	}
	cfg, err := LoadConfig(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Skipf("no Kubernetes config: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Skipf("control plane not reachable: %v", err)
	}
	ctx := context.Background()
	ns := prefix + rand.String(6)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	return cfg, client, ns
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	cfg, client, ns := controlPlane(t, "tollgate-it-")
	c := &cluster{cfg: cfg, client: client, ns: ns}
	ctx := context.Background()
	labels := map[string]string{"app": "hello"}
	_, err := client.AppsV1().Deployments(c.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: c.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "hello", ScaledLabel: "true"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "hello", Image: "example.invalid/hello:1",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Services(c.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: c.ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// replicas is the Deployment's spec.replicas through the scale subresource.
func (c *cluster) replicas(t *testing.T) int32 {
	t.Helper()
	s, err := c.client.AppsV1().Deployments(c.ns).GetScale(context.Background(), "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Spec.Replicas
}

// readyEndpoints counts the ready endpoints of the Service's slices.
func (c *cluster) readyEndpoints(t *testing.T) (ready, all int) {
	t.Helper()
	list, err := c.client.DiscoveryV1().EndpointSlices(c.ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=hello"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			all++
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready++
			}
		}
	}
	return ready, all
}

func (c *cluster) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(clusterLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", clusterLong, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// standIns serve for kwok's pods, whose IPs nothing listens on: one local
// server per pod name, answering "pod NAME" after ?sleep=, and recording
// the most requests each pod ran at once (from every replica together).
type standIns struct {
	mu   sync.Mutex
	srvs map[string]*httptest.Server
	peak map[string]int64
}

func newStandIns(t *testing.T) *standIns {
	s := &standIns{srvs: map[string]*httptest.Server{}, peak: map[string]int64{}}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, srv := range s.srvs {
			srv.Close()
		}
	})
	return s
}

// address is Options.Address.
func (s *standIns) address(pod, _ string, _ int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv, ok := s.srvs[pod]; ok {
		return srv.Listener.Addr().String()
	}
	var now atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := now.Add(1)
		defer now.Add(-1)
		s.mu.Lock()
		s.peak[pod] = max(s.peak[pod], v)
		s.mu.Unlock()
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			time.Sleep(d)
		}
		fmt.Fprintf(w, "pod %s", pod)
	}))
	s.srvs[pod] = srv
	return srv.Listener.Addr().String()
}

// peaks is the most requests each pod ran at once.
func (s *standIns) peaks() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.peak)
}

func (c *cluster) runner(t *testing.T, cfg *rest.Config, mod func(*Options)) *Runner {
	t.Helper()
	clients, err := NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Target:          Target{Namespace: c.ns, Deployment: "hello", Port: 8080},
		Client:          clients.Client,
		Scales:          clients.Scales,
		Metrics:         clients.Metrics,
		Resync:          2 * time.Second,
		MetricsInterval: 2 * time.Second,
		AdoptFor:        -1,
		Logger:          slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	if mod != nil {
		mod(&o)
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// runAll runs fns until the test ends.
func runAll(t *testing.T, fns ...func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(func() {
			if err := fn(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// A held request scales the Deployment from 0 to 1 and is answered once
// its pod is Ready; sustained load raises replicas to the engine's count;
// idle returns them to 0. Replicas and EndpointSlices are read back
// through the API.
func TestClusterScaleFromZeroUpAndDown(t *testing.T) {
	c := newCluster(t)
	si := newStandIns(t)
	r := c.runner(t, c.cfg, func(o *Options) { o.Address = si.address })
	p := pool.New(pool.Options{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	const maxInst = 3
	if err := p.Apply([]pool.ServiceSpec{{
		Name:     "hello",
		Runner:   r,
		Template: "kubernetes",
		Engine:   autoscale.Config{MaxConcurrency: 1, MaxInstances: maxInst, IdleTimeout: time.Second, InitialColdStart: 5 * time.Second},
	}}); err != nil {
		t.Fatal(err)
	}
	runAll(t, r.Run, p.Run)
	front := httptest.NewServer(p.Handler("hello"))
	t.Cleanup(front.Close)
	get := func(path string) (int, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), clusterLong)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b), nil
	}

	if n := c.replicas(t); n != 0 {
		t.Fatalf("replicas before any request = %d", n)
	}
	start := time.Now()
	code, body, err := get("/")
	if err != nil || code != http.StatusOK || !strings.HasPrefix(body, "pod hello-") {
		t.Fatalf("first request: %d %q %v", code, body, err)
	}
	t.Logf("scale from zero: answered by %s after %v", body, time.Since(start).Round(time.Millisecond))
	if n := c.replicas(t); n != 1 {
		t.Errorf("replicas after the first request = %d, want 1", n)
	}
	if ready, _ := c.readyEndpoints(t); ready != 1 {
		t.Errorf("ready endpoints after the first request = %d, want 1", ready)
	}

	// Sustained load: 2×max requests at once, each 300 ms long, on
	// instances taking one at a time.
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	pods := sync.Map{}
	for range 2 * maxInst {
		wg.Go(func() {
			for loadCtx.Err() == nil {
				if code, body, err := get("/?sleep=300ms"); err == nil && code == http.StatusOK {
					pods.Store(body, true)
				}
			}
		})
	}
	c.waitFor(t, fmt.Sprintf("replicas = %d under load", maxInst), func() bool { return c.replicas(t) == maxInst })
	c.waitFor(t, fmt.Sprintf("%d ready endpoints under load", maxInst), func() bool { ready, _ := c.readyEndpoints(t); return ready == maxInst })
	c.waitFor(t, "every pod serves", func() bool {
		n := 0
		pods.Range(func(any, any) bool { n++; return true })
		return n == maxInst
	})
	stopLoad()
	wg.Wait()

	c.waitFor(t, "replicas = 0 when idle", func() bool { return c.replicas(t) == 0 })
	c.waitFor(t, "no endpoints when idle", func() bool { _, all := c.readyEndpoints(t); return all == 0 })
	for _, op := range []string{"get_scale", "update_scale", "patch_pod"} {
		if n := testutil.ToFloat64(r.m.apiErrors.WithLabelValues(op)); n != 0 {
			t.Errorf("%v API errors on %s", n, op)
		}
	}
}

// The Role of deploy/kubernetes/base/rbac.yaml is enough: a leader-elected
// runner under that ServiceAccount scales up, marks the pod it lets go and
// scales down, with no API error other than the absent metrics API.
func TestClusterRBACIsEnough(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	applyRBAC(t, c)
	tok, err := c.client.CoreV1().ServiceAccounts(c.ns).CreateToken(ctx, "tollgate",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := rest.AnonymousClientConfig(c.cfg)
	sa.BearerToken = tok.Status.Token
	r := c.runner(t, sa, func(o *Options) { o.Election = &Election{Identity: "it", RetryPeriod: 200 * time.Millisecond} })
	runAll(t, r.Run)
	in, err := r.Start(ctx, pool.InstanceSpec{Service: "hello", Revision: "hello-1", ID: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, clusterLong)
	defer cancel()
	if err := in.Ready(rctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if n := c.replicas(t); n != 1 {
		t.Errorf("replicas = %d, want 1", n)
	}
	podName := in.(*instance).podName
	if err := in.Stop(clusterLong); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	c.waitFor(t, "replicas = 0", func() bool { return c.replicas(t) == 0 })
	for _, op := range []string{"get_scale", "update_scale", "patch_pod", "get_deployment", "list_pods", "patch_report"} { // a conflict is no RBAC error
		if n := testutil.ToFloat64(r.m.apiErrors.WithLabelValues(op)); n != 0 {
			t.Errorf("%v API errors on %s under the Role", n, op)
		}
	}
	if podName == "" {
		t.Error("the instance's endpoint named no pod")
	}
	if n := testutil.ToFloat64(r.m.sent); n < 1 {
		t.Error("no replica report published under the Role")
	}
}

// applyRBAC creates the ServiceAccount, Role and RoleBinding of
// deploy/kubernetes/base/rbac.yaml in the test's namespace, and the
// admission policies of deploy/kubernetes/policy for it (applyPolicies).
func applyRBAC(t *testing.T, c *cluster) {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/kubernetes/base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("rbac.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			o.Namespace = c.ns
			_, err = c.client.CoreV1().ServiceAccounts(c.ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			o.Namespace = c.ns
			_, err = c.client.RbacV1().Roles(c.ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Namespace = c.ns
			for i := range o.Subjects {
				o.Subjects[i].Namespace = c.ns
			}
			_, err = c.client.RbacV1().RoleBindings(c.ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("rbac.yaml: unexpected %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("rbac.yaml holds %d objects, want ServiceAccount, Role, RoleBinding", n)
	}
	applyPolicies(t, c)
}
