package kube

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/clientcmd"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
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

// Clients are the API clients a Runner takes in its Options.
type Clients struct {
	Client  kubernetes.Interface
	Scales  scale.ScalesGetter
	Metrics metricsclient.Interface
}

// NewClients builds the clients of cfg. The scale client finds each
// resource's scale subresource through API discovery, cached in memory.
func NewClients(cfg *rest.Config) (Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "tollgate"
	}
	client, err := kubernetes.NewForConfig(cfg)
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
	metrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("metrics.k8s.io client: %w", err)
	}
	return Clients{Client: client, Scales: scales, Metrics: metrics}, nil
}
