package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/pool/kube"
)

// fakeCluster is a fake API server (client-go's fake clientset and scale
// client) with one ready pod per Deployment, each pod an HTTP server
// answering its Deployment's name, behind the Service of the
// Deployment's name in namespace apps.
type fakeCluster struct {
	client *fake.Clientset
	addr   map[string]string // pod name: its server's host:port

	mu       sync.Mutex
	replicas map[string]int32
	version  map[string]int
}

func newFakeCluster(t *testing.T, deployments ...string) *fakeCluster {
	t.Helper()
	c := &fakeCluster{client: fake.NewClientset(), addr: map[string]string{}, replicas: map[string]int32{}, version: map[string]int{}}
	ctx := context.Background()
	for i, d := range deployments {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, d) }))
		t.Cleanup(srv.Close)
		pod := d + "-a"
		c.addr[pod] = strings.TrimPrefix(srv.URL, "http://")
		if _, err := c.client.CoreV1().Pods("apps").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "apps"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: d + "-1", Namespace: "apps", Labels: map[string]string{discoveryv1.LabelServiceName: d}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{fmt.Sprintf("10.0.0.%d", i+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "apps"},
			}},
		}
		if _, err := c.client.DiscoveryV1().EndpointSlices("apps").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.replicas[d] = 1
	}
	return c
}

// scales is a scale client over every Deployment of the cluster, with
// optimistic concurrency on resourceVersion.
func (c *fakeCluster) scales() *scalefake.FakeScaleClient {
	s := &scalefake.FakeScaleClient{}
	s.AddReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.GetAction).GetName()
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.replicas[name]; !ok {
			return true, nil, apierrors.NewNotFound(autoscalingv1.Resource("deployments"), name)
		}
		return true, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", ResourceVersion: strconv.Itoa(c.version[name])},
			Spec:       autoscalingv1.ScaleSpec{Replicas: c.replicas[name]},
			Status:     autoscalingv1.ScaleStatus{Replicas: c.replicas[name], Selector: "app=" + name},
		}, nil
	})
	s.AddReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		c.mu.Lock()
		defer c.mu.Unlock()
		if u.ResourceVersion != strconv.Itoa(c.version[u.Name]) {
			return true, nil, apierrors.NewConflict(autoscalingv1.Resource("deployments"), u.Name, fmt.Errorf("the object has been modified"))
		}
		c.replicas[u.Name] = u.Spec.Replicas
		c.version[u.Name]++
		out := u.DeepCopy()
		out.ResourceVersion = strconv.Itoa(c.version[u.Name])
		return true, out, nil
	})
	return s
}

// kubeOptions are a node's options against the cluster: leader election
// as identity id when it is not "".
func (c *fakeCluster) kubeOptions(id string) KubeOptions {
	return KubeOptions{
		LeaderElect: id != "",
		Identity:    id,
		testClients: &kube.Clients{Client: c.client, Scales: c.scales()},
		testOptions: func(o *kube.Options) {
			o.Address = func(pod, _ string, _ int) string { return c.addr[pod] }
		},
	}
}

// boundConfig splits service hello 90/10 over hello-00001 bound to
// Deployment hello-v1 and the latest, the section's hello-v2.
const boundConfig = `services:
  - name: hello
    route: {path_prefix: /hello/}
    autoscale:
      kubernetes: {namespace: apps, deployment: hello-v2}
      min_instances: 1
      traffic:
        - {revision: hello-00001, deployment: hello-v1, percent: 90}
        - {latest_revision: true, percent: 10}
`

// splitThrough waits until n runs revisions hello-00001 and hello-00002,
// each with a ready instance, then sends 100 requests through n's
// listener and counts the answers of each Deployment's pod.
func splitThrough(t *testing.T, n *Node, logs *logtest.Buffer) map[string]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ts, err := n.pools.Revisions("hello")
		var names []string
		ready := 0
		for _, r := range ts.Revisions {
			names = append(names, r.Name)
			if r.Ready > 0 {
				ready++
			}
		}
		if err == nil && slices.Equal(names, []string{"hello-00001", "hello-00002"}) && ready == 2 {
			if runs := ts.Revisions[0].Runs; runs != "Deployment apps/hello-v1" {
				t.Errorf("hello-00001 runs %q, want Deployment apps/hello-v1", runs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revisions %v (%d ready, %v), want hello-00001 and hello-00002 ready\n%s", names, ready, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := map[string]int{}
	for range 100 {
		resp, err := http.Get("http://" + n.Addr().String() + "/hello/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /hello/x: %d %q", resp.StatusCode, b)
		}
		got[string(b)]++
	}
	return got
}

// Two nodes in a row on the same config (a restart) run hello-00001 on
// Deployment hello-v1 and hello-00002 on hello-v2, and both split 90/10
// over the two Deployments' pods.
func TestKubeBoundRevisionsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tollgate.yaml", boundConfig)
	c := newFakeCluster(t, "hello-v1", "hello-v2")
	for i := range 2 {
		var logs logtest.Buffer
		n := newTestNode(t, &logs, Options{ConfigPath: cfg, Kube: c.kubeOptions("")})
		stop := run(t, n, &logs)
		if got := splitThrough(t, n, &logs); got["hello-v1"] != 90 || got["hello-v2"] != 10 {
			t.Fatalf("node %d: split %v, want 90 to hello-v1, 10 to hello-v2", i+1, got)
		}
		if strings.Contains(logs.String(), "level=WARN msg=\"traffic names revisions") {
			t.Errorf("node %d warned of renumbered revisions:\n%s", i+1, logs.String())
		}
		stop()
		n.Close()
	}
}

// With leader election two replicas on the same config run the same
// revisions on the same Deployments and split alike; the admin PUT of
// traffic answers 409; a revision entry without deployment: is refused
// at its line.
func TestKubeBoundTrafficWithLeaderElection(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tollgate.yaml", boundConfig)
	c := newFakeCluster(t, "hello-v1", "hello-v2")
	var nodes []*Node
	for _, id := range []string{"a", "b"} {
		var logs logtest.Buffer
		n := newTestNode(t, &logs, Options{ConfigPath: cfg, Kube: c.kubeOptions(id), AdminToken: "t"})
		run(t, n, &logs)
		if got := splitThrough(t, n, &logs); got["hello-v1"] != 90 || got["hello-v2"] != 10 {
			t.Fatalf("replica %s: split %v, want 90 to hello-v1, 10 to hello-v2", id, got)
		}
		nodes = append(nodes, n)
	}
	req, _ := http.NewRequest(http.MethodPut, "http://"+nodes[1].Addr().String()+"/v1/admin/pools/hello/traffic",
		strings.NewReader(`{"traffic": [{"latest_revision": true, "percent": 100}]}`))
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "traffic is set in the config's traffic: block, which every replica reloads") {
		t.Fatalf("PUT traffic: %d %q, want 409", resp.StatusCode, b)
	}

	unbound := writeFile(t, dir, "unbound.yaml", strings.Replace(boundConfig, "deployment: hello-v1, ", "", 1))
	var logs logtest.Buffer
	bad, err := New(context.Background(), Options{Listen: "127.0.0.1:0", ConfigPath: unbound, Kube: c.kubeOptions("c"), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil {
		bad.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "unbound.yaml:8:22: services[0].autoscale.traffic[0].revision: with --kube-leader-elect (several tollgate replicas), revision hello-00001 needs deployment:") {
		t.Fatalf("unbound traffic with election: %v", err)
	}
}
