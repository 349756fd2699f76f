package kube

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// wait is how long a test waits for something that should happen soon.
const wait = 30 * time.Second

// eventually polls cond until it holds or wait passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, wait, what, cond)
}

// eventuallyWithin is eventually with its own bound, for a condition
// that takes many steps of the code under test (each a few API calls and
// a settle), which a loaded machine stretches.
func eventuallyWithin(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// scaleStore models a Deployment's scale subresource: optimistic
// concurrency on resourceVersion, conflicts on demand, every write kept.
type scaleStore struct {
	mu        sync.Mutex
	replicas  int32
	rv        int
	conflicts int // the next updates that fail with a conflict
	writes    []int32
	gets      int
}

func (s *scaleStore) client(ns, name string) *scalefake.FakeScaleClient {
	c := &scalefake.FakeScaleClient{}
	c.AddReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.gets++
		return true, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: strconv.Itoa(s.rv)},
			Spec:       autoscalingv1.ScaleSpec{Replicas: s.replicas},
			Status:     autoscalingv1.ScaleStatus{Replicas: s.replicas, Selector: "app=" + name},
		}, nil
	})
	c.AddReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		u := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		conflict := apierrors.NewConflict(deployments, name, fmt.Errorf("the object has been modified"))
		if s.conflicts > 0 {
			s.conflicts--
			s.rv++ // someone else wrote
			return true, nil, conflict
		}
		if u.ResourceVersion != strconv.Itoa(s.rv) {
			return true, nil, conflict
		}
		s.replicas = u.Spec.Replicas
		s.rv++
		s.writes = append(s.writes, u.Spec.Replicas)
		out := u.DeepCopy()
		out.ResourceVersion = strconv.Itoa(s.rv)
		return true, out, nil
	})
	return c
}

func (s *scaleStore) get() (replicas int32, writes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas, len(s.writes)
}

// env is one runner against fake clients.
type env struct {
	t      *testing.T
	client *fake.Clientset
	scale  *scaleStore
	r      *Runner
	reg    *prometheus.Registry
	ns     string
}

func newEnv(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	e := &env{t: t, client: fake.NewClientset(), scale: &scaleStore{}, reg: prometheus.NewRegistry(), ns: "default"}
	opts := Options{
		Target:   Target{Namespace: e.ns, Deployment: "hello", Port: 8080},
		Client:   e.client,
		Scales:   e.scale.client(e.ns, "hello"),
		Registry: e.reg,
		Resync:   time.Hour, // writes in these tests come from Start and Stop
		AdoptFor: -1,
	}
	if mod != nil {
		mod(&opts)
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.r = r
	return e
}

// run runs the runner until the test ends.
func (e *env) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.r.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("Run: %v", err)
			}
		case <-time.After(wait):
			e.t.Errorf("Run did not return within %v of its context ending", wait)
		}
	})
}

// pod is one endpoint of a slice.
type pod struct {
	name  string
	ip    string
	ready *bool
}

// setSlice creates or replaces EndpointSlice name of service hello, and
// the pods it lists.
func (e *env) setSlice(name string, pods ...pod) {
	e.t.Helper()
	ctx := context.Background()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "hello"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
	}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: p.ready},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: p.name, Namespace: e.ns},
		})
		// Into the fake's tracker (its watchers see it as a create), not
		// through the client, whose Create builds a REST mapper on every
		// call, for a pod that exists too: most of the CPU time of a
		// test of 400 pods, and beside burners most of its minute.
		err := e.client.Tracker().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: e.ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatal(err)
		}
	}
	slices := e.client.DiscoveryV1().EndpointSlices(e.ns)
	if _, err := slices.Update(ctx, s, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
	} else if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deleteSlice(name string) {
	e.t.Helper()
	if err := e.client.DiscoveryV1().EndpointSlices(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deletionCost(name string) string {
	e.t.Helper()
	p, err := e.client.CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Annotations[DeletionCostAnnotation]
}

func (e *env) replicas(want int32) {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("replicas = %d", want), func() bool { r, _ := e.scale.get(); return r == want })
}
