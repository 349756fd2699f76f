package cloudmap

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
)

// Registrar registers instances of one Cloud Map service as an autoscaled
// pool starts and stops them: it is a pool.Registrar (package pool), made
// by [Registry.Registrar].
type Registrar struct {
	r                  *Registry
	scope              Scope
	namespace, service string
	attrs              map[string]string
}

// Registrar returns the Registrar that lists instances in the service
// named service of the namespace named namespace (both created as HTTP
// when missing) in scope sc, each with attrs plus AWS_INSTANCE_IPV4 (or
// AWS_INSTANCE_IPV6) and AWS_INSTANCE_PORT from its address.
func (r *Registry) Registrar(sc Scope, namespace, service string, attrs map[string]string) *Registrar {
	return &Registrar{r: r, scope: sc, namespace: namespace, service: service, attrs: maps.Clone(attrs)}
}

// Register registers instance at addr (host:port, the host an IP address).
// Its errors wrap [ErrInvalidInput] or [ErrLimitExceeded], or are the
// store's.
func (g *Registrar) Register(ctx context.Context, instance, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: instance %s: address %q: %v", ErrInvalidInput, instance, addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: instance %s: address %q is not an IP address", ErrInvalidInput, instance, addr)
	}
	attrs := maps.Clone(g.attrs)
	if attrs == nil {
		attrs = map[string]string{}
	}
	if ip.Is4() || ip.Is4In6() {
		attrs["AWS_INSTANCE_IPV4"] = ip.Unmap().String()
	} else {
		attrs["AWS_INSTANCE_IPV6"] = ip.String()
	}
	attrs["AWS_INSTANCE_PORT"] = port
	return g.r.RegisterInstance(ctx, g.scope, g.namespace, g.service, instance, attrs)
}

// Deregister removes instance; one that is not registered is not an error.
func (g *Registrar) Deregister(ctx context.Context, instance string) error {
	return g.r.DeregisterInstance(ctx, g.scope, g.namespace, g.service, instance)
}
