package kube

import (
	"context"
	"encoding/json"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/scale"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// clientset adapts client-go's generated clientset (a fake one in these
// tests) to Client.
type clientset struct{ kubernetes.Interface }

func (c clientset) ListEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (*EndpointSliceList, error) {
	l, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return convert[EndpointSliceList](l)
}

func (c clientset) WatchEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := c.DiscoveryV1().EndpointSlices(ns).Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if s, ok := e.Object.(*discoveryv1.EndpointSlice); ok {
			out, err := convert[EndpointSlice](s)
			if err != nil {
				panic(err) // a test's own object
			}
			e.Object = out
		}
		return e, true
	}), nil
}

// convert copies in into a T through JSON, as the API server's objects
// reach the REST client.
func convert[T any](in any) (*T, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	out := new(T)
	return out, json.Unmarshal(b, out)
}

func (c clientset) PatchPod(ctx context.Context, ns, name string, patch []byte) error {
	_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (c clientset) GetDeployment(ctx context.Context, ns, name string) (DeploymentReplicas, error) {
	d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return DeploymentReplicas{}, err
	}
	out := DeploymentReplicas{Replicas: 1, ReadyReplicas: d.Status.ReadyReplicas}
	if d.Spec.Replicas != nil {
		out.Replicas = *d.Spec.Replicas
	}
	return out, nil
}

func (c clientset) GetLease(ctx context.Context, ns, name string) (*coordinationv1.Lease, error) {
	return c.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
}

func (c clientset) CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return c.CoordinationV1().Leases(l.Namespace).Create(ctx, l, metav1.CreateOptions{})
}

func (c clientset) UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return c.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{})
}

// IsWatchListSemanticsUnSupported passes on the fake clientset's answer
// to the informer (a fake does not stream initial events).
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.Interface.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// scalesGetter adapts client-go's scale client to Scales.
type scalesGetter struct{ scale.ScalesGetter }

func (s scalesGetter) GetScale(ctx context.Context, ns string, gr schema.GroupResource, name string) (*Scale, error) {
	sc, err := s.Scales(ns).Get(ctx, gr, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return convert[Scale](sc)
}

func (s scalesGetter) UpdateScale(ctx context.Context, ns string, gr schema.GroupResource, sc *Scale) (*Scale, error) {
	in, err := convert[autoscalingv1.Scale](sc)
	if err != nil {
		return nil, err
	}
	out, err := s.Scales(ns).Update(ctx, gr, in, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return convert[Scale](out)
}

// metricsGetter adapts the generated metrics clientset to PodMetrics.
type metricsGetter struct{ metricsclient.Interface }

func (m metricsGetter) ListPodMetrics(ctx context.Context, ns string, opts metav1.ListOptions) (*PodMetricsList, error) {
	l, err := m.MetricsV1beta1().PodMetricses(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return convert[PodMetricsList](l)
}
