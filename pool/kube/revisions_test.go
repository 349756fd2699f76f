package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/traffic"
)

// deployment is one revision's Deployment on the fake API server: its
// scale subresource, a stand-in for its ReplicaSet that keeps as many
// ready pods in its Service's EndpointSlice as the scale asks for, and
// a server per pod that answers with the pod's name.
type deployment struct {
	name   string
	scale  *scaleStore
	r      *Runner
	client *fake.Clientset

	mu      sync.Mutex
	servers map[string]*httptest.Server // pod name → its stand-in
	onSleep func()                      // called when a ?sleep= request ends
}

// newDeployment makes Deployment name (behind the Service of the same
// name) and its runner, both running until the test ends.
func newDeployment(t *testing.T, client *fake.Clientset, name string) *deployment {
	t.Helper()
	d := &deployment{name: name, scale: &scaleStore{}, client: client, servers: map[string]*httptest.Server{}}
	r, err := New(Options{
		Target:   Target{Namespace: "default", Deployment: name, Port: 8080},
		Client:   client,
		Scales:   d.scale.client("default", name),
		Registry: prometheus.NewRegistry(),
		Resync:   time.Hour, // writes come from Start and Stop
		AdoptFor: -1,
		Address:  d.address,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.r = r
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.Run(ctx); err != nil {
			t.Errorf("Run %s: %v", name, err)
		}
	})
	wg.Go(func() { d.replicaSet(ctx, t) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, s := range d.servers {
			s.Close()
		}
	})
	return d
}

// replicaSet keeps the Deployment's Service's slice listing as many ready
// pods as its scale's replicas, the lowest-numbered ones.
func (d *deployment) replicaSet(ctx context.Context, t *testing.T) {
	last := int32(-1)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, _ := d.scale.get()
		if n == last {
			continue
		}
		if err := d.setPods(ctx, int(n)); err != nil {
			t.Errorf("Deployment %s: %v", d.name, err)
			return
		}
		last = n
	}
}

// setPods makes the slice list pods NAME-0 … NAME-(n-1), all ready.
func (d *deployment) setPods(ctx context.Context, n int) error {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: d.name + "-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: d.name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
	}
	for i := range n {
		name := fmt.Sprintf("%s-%d", d.name, i)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.0.%d.%d", len(d.name), i+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: name, Namespace: "default"},
		})
		_, err := d.client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating pod %s: %w", name, err)
		}
	}
	slices := d.client.DiscoveryV1().EndpointSlices("default")
	_, err := slices.Update(ctx, s, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing the EndpointSlice: %w", err)
	}
	return nil
}

// address is Options.Address: the pod's stand-in server, made on first
// use, which answers "pod NAME" after the request's ?sleep= if any.
func (d *deployment) address(pod, _ string, _ int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.servers[pod]; ok {
		return s.Listener.Addr().String()
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sleep, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			time.Sleep(sleep)
			d.mu.Lock()
			f := d.onSleep
			d.mu.Unlock()
			if f != nil {
				f()
			}
		}
		fmt.Fprintf(w, "pod %s", pod)
	}))
	d.servers[pod] = s
	return s.Listener.Addr().String()
}

// spec is the pool's spec of service hello running on d, as node makes
// it from a kubernetes section naming d.
func (d *deployment) spec(eng autoscale.Config, traffic ...traffic.Target) pool.ServiceSpec {
	return pool.ServiceSpec{Name: "hello", Engine: eng, Runner: d.r, Template: "kubernetes=" + d.name, Traffic: traffic}
}

// getPod sends one request for path through h and returns the pod that
// answered it, failing the test on anything but a 200 from a pod.
func getPod(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	pod, ok := strings.CutPrefix(string(body), "pod ")
	if rec.Code != http.StatusOK || !ok {
		t.Fatalf("GET %s: %d %q, want 200 from a pod", path, rec.Code, body)
	}
	return pod
}

// newKubePool runs a pool with specs until the test ends.
func newKubePool(t *testing.T, specs ...pool.ServiceSpec) *pool.Pool {
	t.Helper()
	p := pool.New(pool.Options{Registry: prometheus.NewRegistry()})
	if err := p.Apply(specs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// On Kubernetes each revision is a Deployment: with hello-00001 on
// Deployment hello-v1 taking 90 % and hello-00002 on hello-v2 10 %, each
// revision's minimum is written to its own Deployment's replicas, and
// 2,000 requests reach the two Deployments' pods within 3 % of their
// shares.
func TestTrafficSplitsOverTwoDeployments(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset()
	v1, v2 := newDeployment(t, client, "hello-v1"), newDeployment(t, client, "hello-v2")
	p := newKubePool(t, v1.spec(autoscale.Config{MinInstances: 2, MaxInstances: 4}))
	h := p.Handler("hello")
	if pod := getPod(t, h, "/"); !strings.HasPrefix(pod, "hello-v1-") {
		t.Fatalf("hello-00001 answered from pod %s, want one of Deployment hello-v1", pod)
	}

	err := p.Apply([]pool.ServiceSpec{v2.spec(autoscale.Config{MinInstances: 1, MaxInstances: 3},
		traffic.Target{RevisionName: "hello-00001", Percent: 90}, traffic.Target{LatestRevision: true, Percent: 10})})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "hello-00002 ready and taking its share", func() bool {
		ts, err := p.Revisions("hello")
		return err == nil && len(ts.Revisions) == 2 && ts.Revisions[1].Ready == 1 && ts.Revisions[1].Percent == 10
	})
	if r, _ := v1.scale.get(); r != 2 {
		t.Errorf("Deployment hello-v1 has %d replicas, want hello-00001's minimum 2", r)
	}
	if r, _ := v2.scale.get(); r != 1 {
		t.Errorf("Deployment hello-v2 has %d replicas, want hello-00002's minimum 1", r)
	}

	const n = 2000
	byDeployment := map[string]int{}
	byPod := map[string]int{}
	for range n {
		pod := getPod(t, h, "/")
		byPod[pod]++
		byDeployment[pod[:strings.LastIndex(pod, "-")]]++
	}
	for name, share := range map[string]float64{"hello-v1": 0.9, "hello-v2": 0.1} {
		if got := float64(byDeployment[name]) / n; got < share-0.03 || got > share+0.03 {
			t.Errorf("Deployment %s took %.3f of %d requests, want %.2f ± 0.03 (by pod: %v)", name, got, n, share, byPod)
		}
	}
	if len(byDeployment) != 2 {
		t.Errorf("requests reached %v, want only hello-v1 and hello-v2", byDeployment)
	}
	if r, _ := v1.scale.get(); r < 2 {
		t.Errorf("Deployment hello-v1 fell to %d replicas while taking 90 %%", r)
	}
}

// A reload that names another Deployment makes revision hello-00002 on
// it, as a changed command does for processes: traffic moves once its
// pods are ready, and the old Deployment is scaled to zero only after
// its request in flight has finished.
func TestReloadToAnotherDeploymentMakesARevision(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset()
	v1, v2 := newDeployment(t, client, "hello-v1"), newDeployment(t, client, "hello-v2")
	eng := autoscale.Config{MinInstances: 2, MaxInstances: 4}
	p := newKubePool(t, v1.spec(eng))
	h := p.Handler("hello")
	if pod := getPod(t, h, "/"); !strings.HasPrefix(pod, "hello-v1-") {
		t.Fatalf("hello-00001 answered from pod %s, want one of Deployment hello-v1", pod)
	}
	v1.replicasAre(t, 2)

	// A slow request on hello-00001 is in flight across the reload: its
	// Deployment keeps its pods until it is answered.
	var atEnd int32 = -1
	v1.mu.Lock()
	v1.onSleep = func() {
		r, _ := v1.scale.get()
		v1.mu.Lock()
		atEnd = r
		v1.mu.Unlock()
	}
	v1.mu.Unlock()
	slow := make(chan string, 1)
	go func() { slow <- getPod(t, h, "/?sleep=1s") }()
	eventually(t, "the slow request in flight", func() bool {
		st := p.Status()
		return len(st) == 1 && st[0].InFlight == 1
	})

	if err := p.Apply([]pool.ServiceSpec{v2.spec(eng)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hello-00002 taking every request", func() bool {
		ts, err := p.Revisions("hello")
		return err == nil && len(ts.Revisions) >= 1 && ts.Revisions[len(ts.Revisions)-1].Name == "hello-00002" &&
			ts.Revisions[len(ts.Revisions)-1].Percent == 100
	})
	for range 20 {
		if pod := getPod(t, h, "/"); !strings.HasPrefix(pod, "hello-v2-") {
			t.Fatalf("after the rollout a request reached pod %s, want one of Deployment hello-v2", pod)
		}
	}
	if pod := <-slow; !strings.HasPrefix(pod, "hello-v1-") {
		t.Errorf("the request in flight was answered by pod %s, want hello-v1's", pod)
	}
	v1.replicasAre(t, 0)
	v2.replicasAre(t, 2)
	v1.mu.Lock()
	defer v1.mu.Unlock()
	if atEnd != 2 {
		t.Errorf("Deployment hello-v1 had %d replicas when its request in flight ended, want 2: scaled down before the drain", atEnd)
	}
	ts, err := p.Revisions("hello")
	if err != nil || len(ts.Revisions) != 1 || ts.Revisions[0].Name != "hello-00002" {
		t.Errorf("revisions after the drain: %+v, %v; want hello-00002 alone", ts.Revisions, err)
	}
}

// replicasAre waits until the Deployment's replicas are want.
func (d *deployment) replicasAre(t *testing.T, want int32) {
	t.Helper()
	eventually(t, fmt.Sprintf("Deployment %s at %d replicas", d.name, want), func() bool { r, _ := d.scale.get(); return r == want })
}
