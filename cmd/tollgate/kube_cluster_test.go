package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// kwokPods is the range kwok gives pod IPs from (../shared/k8s).
const kwokPods = "10.244.0.0/16"

// podStandIn answers, on every address of kwokPods, for the pods of a
// control plane without kubelets: the range is routed to the loopback
// device as local (AnyIP), so one server listening on all interfaces
// receives what tollgate sends any pod IP. It needs CAP_NET_ADMIN; the
// route is removed when the test ends.
func podStandIn(t *testing.T) (port int) {
	t.Helper()
	out, err := exec.Command("ip", "route", "add", "local", kwokPods, "dev", "lo", "table", "local").CombinedOutput()
	switch {
	case err == nil:
		t.Cleanup(func() { _ = exec.Command("ip", "route", "del", "local", kwokPods, "dev", "lo", "table", "local").Run() })
	case strings.Contains(string(out), "File exists"):
		// Another test routes it already.
	default:
		msg := fmt.Sprintf("cannot route %s to the loopback device (needs ip and CAP_NET_ADMIN): %v %s", kwokPods, err, out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			time.Sleep(d)
		}
		host, _, _ := net.SplitHostPort(r.Context().Value(http.LocalAddrContextKey).(net.Addr).String())
		fmt.Fprintf(w, "pod %s", host)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// Two `tollgate serve --kube-leader-elect` processes in front of one
// Deployment of the local control plane (../shared/k8s): a request at
// zero through the follower is answered; under load through both, the
// leader is killed with SIGKILL; the other takes over within the lease
// duration, replicas never drop to zero, and no request through it fails.
func TestClusterServeReplicasSurviveLeaderSIGKILL(t *testing.T) {
	if os.Getenv("TOLLGATE_KUBE") != "1" || os.Getenv("KUBECONFIG") == "" {
		t.Skip("set TOLLGATE_KUBE=1 and KUBECONFIG (../shared/k8s/start-cluster.sh) to run against a real API server")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Skipf("control plane not reachable: %v", err)
	}
	port := podStandIn(t)
	ctx := context.Background()
	ns := "tollgate-serve-" + rand.String(6)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	labels := map[string]string{"app": "hello"}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "hello", Image: "example.invalid/hello:1",
					Ports: []corev1.ContainerPort{{ContainerPort: int32(port)}},
				}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: int32(port), TargetPort: intstr.FromInt(port)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := func() int32 {
		s, err := client.AppsV1().Deployments(ns).GetScale(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			t.Errorf("reading the scale: %v", err)
			return -1
		}
		return s.Spec.Replicas
	}

	conf := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `services:
  - name: hello
    route: {path_prefix: /hello/, strip_prefix: true}
    autoscale:
      kubernetes: {namespace: %s, deployment: hello, port: %d}
      max_concurrency: 4
      max_instances: 3
      idle_timeout: 2s
`, ns, port), 0o600); err != nil {
		t.Fatal(err)
	}
	const lease = 8 * time.Second
	start := func(id string) *server {
		return startServerEnv(t, []string{"KUBECONFIG=" + os.Getenv("KUBECONFIG")},
			"--config", conf, "--kube-leader-elect", "--kube-identity", id, "--kube-lease-duration", lease.String())
	}
	a, b := start("a"), start("b")
	// Which one leads: the first to log it (each server's log is read
	// here from now on, and every time one starts leading is sent).
	leaderID := make(chan string, 4)
	for id, s := range map[string]*server{"a": a, "b": b} {
		go func() {
			for line := range s.logs {
				if strings.Contains(line, "leading: writing replicas") {
					leaderID <- id
				}
			}
		}()
	}
	var leader, follower *server
	var followerID string
	select {
	case id := <-leaderID:
		leader, follower, followerID = a, b, "b"
		if id == "b" {
			leader, follower, followerID = b, a, "a"
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no replica led within 60 s")
	}
	get := func(s *server, path string) (int, string, error) {
		c, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(c, http.MethodGet, "http://"+s.addr+"/hello"+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(body), nil
	}

	// At zero, through the follower.
	began := time.Now()
	code, body, err := get(follower, "/")
	if err != nil || code != http.StatusOK || !strings.HasPrefix(body, "pod 10.244.") {
		t.Fatalf("first request through the follower at zero: %d %q %v", code, body, err)
	}
	t.Logf("follower at zero: answered by %s after %v", body, time.Since(began).Round(time.Millisecond))

	// Load through both, then SIGKILL the leader.
	var failed, okCount atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range []*server{leader, follower, follower} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, _, err := get(s, "/?sleep=200ms")
				if s == leader {
					continue // its requests in flight at the kill may fail
				}
				if err != nil || code != http.StatusOK {
					failed.Add(1)
					lastErr.Store(fmt.Sprintf("%d %v", code, errors.Join(err)))
					continue
				}
				okCount.Add(1)
			}
		})
	}
	time.Sleep(5 * time.Second)
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	zero := false
	took := false
	// Watch for 45 s, or for three lease durations once the follower leads
	// (the killed replica's report has gone stale by then).
	for d := time.Since(killed); d < 45*time.Second && !(took && d > 3*lease); d = time.Since(killed) {
		if replicas() == 0 {
			zero = true
		}
		select {
		case id := <-leaderID:
			if id == followerID && !took {
				took = true
				t.Logf("the follower led %v after the leader's SIGKILL (lease %v)", time.Since(killed).Round(time.Millisecond), lease)
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	close(stop)
	wg.Wait()
	if !took {
		t.Errorf("the follower did not take over within 45 s of the leader's SIGKILL (lease %v)", lease)
	}
	if zero {
		t.Error("replicas went to zero after the leader's SIGKILL")
	}
	t.Logf("through the surviving replica: %d answered, %d failed", okCount.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d requests through the surviving replica failed (last: %v)", failed.Load(), lastErr.Load())
	}
}
