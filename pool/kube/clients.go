package kube

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/clientcmd"
	metricsv1beta1 "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
)

// Client is the part of client-go's clientset a Runner uses, one typed
// client per API group: a kubernetes.Interface (the clientset, or the
// fake one in tests) is one, and so is what NewClients builds, which
// links only these groups' clients.
type Client interface {
	AppsV1() appsv1.AppsV1Interface
	CoreV1() corev1.CoreV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	DiscoveryV1() discoveryv1.DiscoveryV1Interface
}

// MetricsClient is the part of the metrics.k8s.io clientset a Runner
// uses: a metrics versioned.Interface (or its fake) is one.
type MetricsClient interface {
	MetricsV1beta1() metricsv1beta1.MetricsV1beta1Interface
}

// typedClients are the typed clients of the groups in Client, sharing one
// HTTP client as kubernetes.NewForConfig's do.
type typedClients struct {
	apps         *appsv1.AppsV1Client
	core         *corev1.CoreV1Client
	coordination *coordinationv1.CoordinationV1Client
	discovery    *discoveryv1.DiscoveryV1Client
}

func (c *typedClients) AppsV1() appsv1.AppsV1Interface { return c.apps }
func (c *typedClients) CoreV1() corev1.CoreV1Interface { return c.core }
func (c *typedClients) CoordinationV1() coordinationv1.CoordinationV1Interface {
	return c.coordination
}
func (c *typedClients) DiscoveryV1() discoveryv1.DiscoveryV1Interface { return c.discovery }

// metricsClient is the typed metrics.k8s.io/v1beta1 client.
type metricsClient struct {
	v1beta1 *metricsv1beta1.MetricsV1beta1Client
}

func (c metricsClient) MetricsV1beta1() metricsv1beta1.MetricsV1beta1Interface { return c.v1beta1 }

// newTyped builds one typed client per group the Runner uses, on one
// HTTP client, as kubernetes.NewForConfig does for every group.
func newTyped(cfg *rest.Config) (*typedClients, metricsClient, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, metricsClient{}, err
	}
	c := &typedClients{}
	if c.apps, err = appsv1.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, metricsClient{}, err
	}
	if c.core, err = corev1.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, metricsClient{}, err
	}
	if c.coordination, err = coordinationv1.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, metricsClient{}, err
	}
	if c.discovery, err = discoveryv1.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, metricsClient{}, err
	}
	m, err := metricsv1beta1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, metricsClient{}, fmt.Errorf("metrics.k8s.io client: %w", err)
	}
	return c, metricsClient{m}, nil
}

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

// Clients are the API clients a Runner takes in its Options.
type Clients struct {
	Client  Client
	Scales  scale.ScalesGetter
	Metrics MetricsClient
}

// NewClients builds the clients of cfg. The scale client finds each
// resource's scale subresource through API discovery, cached in memory.
func NewClients(cfg *rest.Config) (Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "tollgate"
	}
	client, metrics, err := newTyped(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	scales, err := scale.NewForConfig(cfg, restmapper.NewDeferredDiscoveryRESTMapper(cached), dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return Clients{}, fmt.Errorf("scale client: %w", err)
	}
	return Clients{Client: client, Scales: scales, Metrics: metrics}, nil
}
