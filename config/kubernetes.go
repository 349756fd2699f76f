package config

// This file is an autoscale section's kubernetes target: the Deployment
// whose pods are the instances.

import (
	"regexp"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Kubernetes names the Deployment whose pods are a service's instances.
type Kubernetes struct {
	// Namespace holds the Deployment and the Service; empty means
	// tollgate's own (kube.OwnNamespace: $POD_NAMESPACE, a pod's
	// ServiceAccount, the kubeconfig's context), resolved when the
	// runner is made.
	Namespace string
	// Deployment is scaled through its scale subresource; required.
	Deployment string
	// Service lists the Deployment's pods in its EndpointSlices; empty
	// means the Deployment's name.
	Service string
	// Port is the pod port requests go to; 0 means the Service's only
	// port.
	Port int
}

// dnsLabel is compiled on first use, as parse.go's bounded patterns are.
var dnsLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`) })

// kubernetes parses {namespace, deployment, service, port}.
func (p *parser) kubernetes(n *yaml.Node, path string) (*Kubernetes, bool) {
	k := &Kubernetes{}
	ok := true
	name := func(dst *string) func(_, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			s, good := p.str(v, f)
			if good && !dnsLabel().MatchString(s) {
				p.errorf(v, f, "%q is not a Kubernetes name (lower-case letters, digits and -, at most 63)", s)
				good = false
			}
			ok = ok && good
			*dst = s
		}
	}
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"namespace":  name(&k.Namespace),
		"deployment": name(&k.Deployment),
		"service":    name(&k.Service),
		"port": func(_, v *yaml.Node, f string) {
			x, good := p.integer(v, f)
			if good && (x < 1 || x > 65535) {
				p.errorf(v, f, "%d not in [1, 65535]", x)
				good = false
			}
			ok = ok && good
			k.Port = int(x)
		},
	})
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	if k.Deployment == "" && ok {
		p.errorf(n, joinField(path, "deployment"), "missing")
		ok = false
	}
	if k.Service == "" {
		k.Service = k.Deployment
	}
	return k, ok
}
