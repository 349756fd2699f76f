package kube

import (
	"context"
	"errors"
	"fmt"
	"os"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// LoadConfig finds the API server and credentials: the kubeconfig file
// when path is set, else $KUBECONFIG, else the in-cluster config (a pod's
// ServiceAccount), else ~/.kube/config.
func LoadConfig(path string) (*rest.Config, error) {
	if path == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("in-cluster Kubernetes config: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// Client is the part of the Kubernetes API a Runner calls, besides the
// scale subresource and metrics.k8s.io: it watches EndpointSlices,
// patches pod deletion costs, reads the Deployment and, with election,
// holds the Lease. [NewClients] builds one over a rest.Config.
//
// It is this narrow (and not client-go's kubernetes.Interface) so that
// the binary links five API groups, not all of them: client-go's
// clientset registers every group at init, which cost tens of
// milliseconds on every start of every tollgate process.
type Client interface {
	// ListEndpointSlices lists the EndpointSlices of namespace.
	ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*EndpointSliceList, error)
	// WatchEndpointSlices watches the EndpointSlices of namespace.
	WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	// PatchPod applies a JSON merge patch to a pod.
	PatchPod(ctx context.Context, namespace, name string, mergePatch []byte) error
	// GetDeployment reads an apps/v1 Deployment's replica counts.
	GetDeployment(ctx context.Context, namespace, name string) (DeploymentReplicas, error)
	// GetLease reads a coordination.k8s.io/v1 Lease.
	GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	// CreateLease creates a Lease.
	CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
	// UpdateLease replaces a Lease (a conflict if its resourceVersion is
	// not the stored one).
	UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
}

// DeploymentReplicas are the counts a Runner logs of its Deployment when
// it starts (the apps/v1 type is not linked: its pod template holds most
// of the core API's types).
type DeploymentReplicas struct {
	// Replicas is spec.replicas (1 when unset, the API's default).
	Replicas int32
	// ReadyReplicas is status.readyReplicas.
	ReadyReplicas int32
}

// Scales reads and writes the scale subresource of a scalable resource
// (a Deployment, a StatefulSet, a custom resource with a scale
// subresource), as HPA and KEDA do.
type Scales interface {
	// GetScale reads the scale of resource name in namespace.
	GetScale(ctx context.Context, namespace string, resource schema.GroupResource, name string) (*Scale, error)
	// UpdateScale writes it (a conflict if its resourceVersion is not the
	// stored one).
	UpdateScale(ctx context.Context, namespace string, resource schema.GroupResource, scale *Scale) (*Scale, error)
}

// PodMetricsLister reads pod CPU from metrics.k8s.io.
type PodMetricsLister interface {
	// ListPodMetrics lists the PodMetrics of namespace.
	ListPodMetrics(ctx context.Context, namespace string, opts metav1.ListOptions) (*PodMetricsList, error)
}

// Clients are the API clients a Runner takes in its Options.
type Clients struct {
	Client  Client
	Scales  Scales
	Metrics PodMetricsLister
}

// NewClients builds the clients of cfg, all three over one REST client
// per API group version. The scale subresource of a resource outside
// the apps group is found through the group's preferred version (API
// discovery, cached).
func NewClients(cfg *rest.Config) (Clients, error) {
	c, err := newRESTClients(cfg)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Client: c, Scales: c, Metrics: c}, nil
}
