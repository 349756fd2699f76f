package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

var discoveryV1 = schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"}

// restClients implements Client, Scales and PodMetrics over client-go's
// REST client with a scheme of only the groups it reads and writes (the
// generated clientset's scheme holds every group).
type restClients struct {
	cfg    *rest.Config
	http   *http.Client
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	params runtime.ParameterCodec

	core, apps, coordination, discovery, metrics *rest.RESTClient

	mu       sync.Mutex
	clients  map[schema.GroupVersion]*rest.RESTClient
	versions map[string]string // API group → preferred version
}

func newRESTClients(cfg *rest.Config) (*restClients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "tollgate"
	}
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("kubernetes scheme: %w", err)
	}
	scheme.AddKnownTypes(discoveryV1, &EndpointSlice{}, &EndpointSliceList{})
	for _, gv := range []schema.GroupVersion{discoveryV1, {Version: "v1"}} {
		metav1.AddToGroupVersion(scheme, gv) // Status, WatchEvent, the options
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes HTTP client: %w", err)
	}
	c := &restClients{
		cfg: cfg, http: hc, scheme: scheme, codecs: serializer.NewCodecFactory(scheme),
		params:   runtime.NewParameterCodec(scheme),
		clients:  map[schema.GroupVersion]*rest.RESTClient{},
		versions: map[string]string{"": "v1", "apps": "v1"},
	}
	for _, x := range []struct {
		to *(*rest.RESTClient)
		gv schema.GroupVersion
	}{
		{&c.core, schema.GroupVersion{Version: "v1"}},
		{&c.apps, schema.GroupVersion{Group: "apps", Version: "v1"}},
		{&c.coordination, coordinationv1.SchemeGroupVersion},
		{&c.discovery, discoveryV1},
		{&c.metrics, schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}},
	} {
		if *x.to, err = c.client(x.gv); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// client returns the REST client of gv, made once.
func (c *restClients) client(gv schema.GroupVersion) (*rest.RESTClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc, ok := c.clients[gv]; ok {
		return rc, nil
	}
	cfg := rest.CopyConfig(c.cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(c.scheme, c.codecs).WithoutConversion()
	rc, err := rest.RESTClientForConfigAndClient(cfg, c.http)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
	}
	c.clients[gv] = rc
	return rc, nil
}

func (c *restClients) ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*EndpointSliceList, error) {
	out := &EndpointSliceList{}
	err := c.discovery.Get().Namespace(namespace).Resource("endpointslices").
		VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

func (c *restClients) WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.discovery.Get().Namespace(namespace).Resource("endpointslices").
		VersionedParams(&opts, c.params).Watch(ctx)
}

func (c *restClients) PatchPod(ctx context.Context, namespace, name string, mergePatch []byte) error {
	return c.core.Patch(types.MergePatchType).Namespace(namespace).Resource("pods").Name(name).
		Body(mergePatch).Do(ctx).Error()
}

func (c *restClients) GetDeployment(ctx context.Context, namespace, name string) (DeploymentReplicas, error) {
	raw, err := c.apps.Get().Namespace(namespace).Resource("deployments").Name(name).Do(ctx).Raw()
	if err != nil {
		return DeploymentReplicas{}, err
	}
	var d struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
		Status struct {
			ReadyReplicas int32 `json:"readyReplicas"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return DeploymentReplicas{}, fmt.Errorf("decoding Deployment %s/%s: %w", namespace, name, err)
	}
	out := DeploymentReplicas{Replicas: 1, ReadyReplicas: d.Status.ReadyReplicas}
	if d.Spec.Replicas != nil {
		out.Replicas = *d.Spec.Replicas
	}
	return out, nil
}

func (c *restClients) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Get().Namespace(namespace).Resource("leases").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *restClients) CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Post().Namespace(lease.Namespace).Resource("leases").Body(lease).Do(ctx).Into(out)
	return out, err
}

func (c *restClients) UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Put().Namespace(lease.Namespace).Resource("leases").Name(lease.Name).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (c *restClients) ListPodMetrics(ctx context.Context, namespace string, opts metav1.ListOptions) (*PodMetricsList, error) {
	raw, err := c.metrics.Get().Namespace(namespace).Resource("pods").VersionedParams(&opts, c.params).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	out := &PodMetricsList{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("decoding PodMetrics of %s: %w", namespace, err)
	}
	return out, nil
}

func (c *restClients) GetScale(ctx context.Context, namespace string, resource schema.GroupResource, name string) (*Scale, error) {
	rc, err := c.scaleClient(ctx, resource.Group)
	if err != nil {
		return nil, err
	}
	raw, err := rc.Get().Namespace(namespace).Resource(resource.Resource).Name(name).SubResource("scale").Do(ctx).Raw()
	return decodeScale(raw, err)
}

func (c *restClients) UpdateScale(ctx context.Context, namespace string, resource schema.GroupResource, s *Scale) (*Scale, error) {
	rc, err := c.scaleClient(ctx, resource.Group)
	if err != nil {
		return nil, err
	}
	in := *s
	in.APIVersion, in.Kind = "autoscaling/v1", "Scale"
	body, err := json.Marshal(&in)
	if err != nil {
		return nil, fmt.Errorf("encoding Scale: %w", err)
	}
	raw, err := rc.Put().Namespace(namespace).Resource(resource.Resource).Name(s.Name).SubResource("scale").
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw()
	return decodeScale(raw, err)
}

func decodeScale(raw []byte, err error) (*Scale, error) {
	if err != nil {
		return nil, err
	}
	out := &Scale{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("decoding Scale: %w", err)
	}
	return out, nil
}

// scaleClient returns the REST client of group's preferred version, asked
// of the API server (GET /apis/GROUP) once per group. The scale
// subresource of every scalable resource is an autoscaling/v1 Scale.
func (c *restClients) scaleClient(ctx context.Context, group string) (*rest.RESTClient, error) {
	c.mu.Lock()
	v, ok := c.versions[group]
	c.mu.Unlock()
	if !ok {
		raw, err := c.core.Get().AbsPath("/apis", group).Do(ctx).Raw()
		if err != nil {
			return nil, fmt.Errorf("discovering API group %q: %w", group, err)
		}
		var g metav1.APIGroup
		if err := json.Unmarshal(raw, &g); err != nil || g.PreferredVersion.Version == "" {
			return nil, fmt.Errorf("discovering API group %q: no preferred version in %.200q", group, raw)
		}
		v = g.PreferredVersion.Version
		c.mu.Lock()
		c.versions[group] = v
		c.mu.Unlock()
	}
	return c.client(schema.GroupVersion{Group: group, Version: v})
}
