package kube

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The API objects a Runner reads and writes, declared here with only the
// fields it uses (their JSON names are the API's, so they decode the
// server's objects and unknown fields are ignored). client-go's types
// for EndpointSlice, Scale and PodMetrics import the core group, whose
// package registers all of its ~100 kinds at init: linking it cost
// several megabytes of binary and the init of every tollgate process.

// LabelServiceName labels an EndpointSlice with the Service it belongs to.
const LabelServiceName = "kubernetes.io/service-name"

// EndpointSlice is the part of a discovery.k8s.io/v1 EndpointSlice a
// Runner reads.
type EndpointSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// AddressType is IPv4, IPv6 or FQDN.
	AddressType string `json:"addressType"`
	// Endpoints are the slice's endpoints.
	Endpoints []Endpoint `json:"endpoints"`
	// Ports are the ports every endpoint serves.
	Ports []EndpointPort `json:"ports,omitempty"`
}

// Endpoint is one endpoint of an EndpointSlice.
type Endpoint struct {
	// Addresses are the endpoint's addresses; the first is used.
	Addresses []string `json:"addresses"`
	// Conditions say whether it is ready.
	Conditions EndpointConditions `json:"conditions,omitempty"`
	// TargetRef names its pod.
	TargetRef *ObjectReference `json:"targetRef,omitempty"`
}

// EndpointConditions are an endpoint's conditions.
type EndpointConditions struct {
	// Ready is nil when unknown, which counts as ready.
	Ready *bool `json:"ready,omitempty"`
}

// ObjectReference names the object behind an endpoint.
type ObjectReference struct {
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// EndpointPort is a port of an EndpointSlice.
type EndpointPort struct {
	Name *string `json:"name,omitempty"`
	Port *int32  `json:"port,omitempty"`
}

// EndpointSliceList is a list of EndpointSlices.
type EndpointSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EndpointSlice `json:"items"`
}

// Scale is an autoscaling/v1 Scale, the scale subresource.
type Scale struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaleSpec   `json:"spec,omitempty"`
	Status            ScaleStatus `json:"status,omitempty"`
}

// ScaleSpec is the replica count asked for.
type ScaleSpec struct {
	Replicas int32 `json:"replicas,omitempty"`
}

// ScaleStatus is the replica count observed and the pods' label selector.
type ScaleStatus struct {
	Replicas int32  `json:"replicas"`
	Selector string `json:"selector,omitempty"`
}

// PodMetrics is the part of a metrics.k8s.io/v1beta1 PodMetrics a Runner
// reads.
type PodMetrics struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Timestamp is the end of the window the usage was measured over.
	Timestamp metav1.Time `json:"timestamp"`
	// Containers are the pod's containers' usage.
	Containers []ContainerMetrics `json:"containers"`
}

// ContainerMetrics is one container's resource usage (cpu in cores).
type ContainerMetrics struct {
	Name  string                       `json:"name"`
	Usage map[string]resource.Quantity `json:"usage"`
}

// PodMetricsList is a list of PodMetrics.
type PodMetricsList struct {
	Items []PodMetrics `json:"items"`
}

// DeepCopyObject copies s (a runtime.Object, so the informer can hold it).
func (s *EndpointSlice) DeepCopyObject() runtime.Object { return s.DeepCopy() }

// DeepCopy copies s.
func (s *EndpointSlice) DeepCopy() *EndpointSlice {
	if s == nil {
		return nil
	}
	out := &EndpointSlice{TypeMeta: s.TypeMeta, AddressType: s.AddressType}
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if s.Endpoints != nil {
		out.Endpoints = make([]Endpoint, len(s.Endpoints))
		for i, e := range s.Endpoints {
			c := Endpoint{Addresses: append([]string(nil), e.Addresses...)}
			if e.Conditions.Ready != nil {
				r := *e.Conditions.Ready
				c.Conditions.Ready = &r
			}
			if e.TargetRef != nil {
				ref := *e.TargetRef
				c.TargetRef = &ref
			}
			out.Endpoints[i] = c
		}
	}
	if s.Ports != nil {
		out.Ports = make([]EndpointPort, len(s.Ports))
		for i, p := range s.Ports {
			if p.Name != nil {
				n := *p.Name
				out.Ports[i].Name = &n
			}
			if p.Port != nil {
				n := *p.Port
				out.Ports[i].Port = &n
			}
		}
	}
	return out
}

// DeepCopyObject copies l.
func (l *EndpointSliceList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &EndpointSliceList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]EndpointSlice, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopy()
		}
	}
	return out
}
