package cloudmap

import (
	"context"
	"strings"
)

// checkNamespaceName follows the model's NamespaceNameHttp,
// NamespaceNamePrivate and NamespaceNamePublic patterns.
func checkNamespaceName(typ, v string) error {
	switch typ {
	case "HTTP", "DNS_PRIVATE":
		max := maxNameLen
		if typ == "DNS_PRIVATE" {
			max = maxDNSNameLen
		}
		if err := checkRequired("Name", v, max); err != nil {
			return err
		}
		if strings.HasPrefix(v, "arn:") {
			return invalid("Name %s must not start with arn:", quote(v))
		}
		return nil
	}
	// DNS_PUBLIC: at least two DNS labels of letters, digits and '-'.
	bad := invalid("Name %s is not a public DNS name (labels of letters, digits and '-', at least two, at most %d characters)", quote(v), maxDNSNameLen)
	if v == "" {
		return invalid("Name is required")
	}
	labels := strings.Split(v, ".")
	if len(v) > maxDNSNameLen || len(labels) < 2 {
		return bad
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return bad
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return bad
			}
		}
	}
	return nil
}

func (r *Registry) createPublicDNSNamespace(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in createNamespaceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkNamespaceName("DNS_PUBLIC", in.Name); err != nil {
		return nil, err
	}
	if in.Vpc != "" {
		return nil, invalid("a public DNS namespace takes no Vpc")
	}
	return r.createNamespace(ctx, sc, in, "DNS_PUBLIC")
}

// updateNamespaceIn is the input of the three UpdateXNamespace calls.
type updateNamespaceIn struct {
	Id               string
	UpdaterRequestId string
	Namespace        *struct {
		Description *string
		Properties  *struct {
			DnsProperties *struct{ SOA *soaJSON }
		}
	}
}

func (r *Registry) updateHTTPNamespace(ctx context.Context, sc Scope, body []byte) (any, error) {
	return r.updateNamespace(ctx, sc, body, "HTTP")
}

func (r *Registry) updatePrivateDNSNamespace(ctx context.Context, sc Scope, body []byte) (any, error) {
	return r.updateNamespace(ctx, sc, body, "DNS_PRIVATE")
}

func (r *Registry) updatePublicDNSNamespace(ctx context.Context, sc Scope, body []byte) (any, error) {
	return r.updateNamespace(ctx, sc, body, "DNS_PUBLIC")
}

// updateNamespace changes a namespace of type typ: its description and,
// for DNS namespaces, its SOA TTL. A repeated UpdaterRequestId returns the
// first call's OperationId.
func (r *Registry) updateNamespace(ctx context.Context, sc Scope, body []byte, typ string) (any, error) {
	var in updateNamespaceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkRequired("Id", in.Id, 255); err != nil {
		return nil, err
	}
	if err := checkOptional("UpdaterRequestId", in.UpdaterRequestId, maxIDLen); err != nil {
		return nil, err
	}
	ch := in.Namespace
	if ch == nil {
		return nil, invalid("Namespace is required")
	}
	if typ == "HTTP" && ch.Description == nil {
		return nil, invalid("Namespace.Description is required")
	}
	if ch.Description != nil {
		if err := checkDescription(*ch.Description); err != nil {
			return nil, err
		}
	}
	var ttl *int64
	if p := ch.Properties; p != nil {
		if typ == "HTTP" {
			return nil, invalid("an HTTP namespace has no DNS properties")
		}
		if p.DnsProperties == nil || p.DnsProperties.SOA == nil || checkTTL(p.DnsProperties.SOA.TTL) != nil {
			return nil, invalid("Namespace.Properties.DnsProperties.SOA.TTL is required, between 0 and 2147483647")
		}
		ttl = p.DnsProperties.SOA.TTL
	}
	opID, err := r.newOpID()
	if err != nil {
		return nil, err
	}
	err = r.update(ctx, sc, func(s *state) error {
		ns, err := findNamespace(s, in.Id)
		if err != nil {
			return err
		}
		if ns.Type != typ {
			return invalid("namespace %s is of type %s, not %s", ns.ID, ns.Type, typ)
		}
		if in.UpdaterRequestId != "" && ns.UpdaterID == in.UpdaterRequestId {
			opID = ns.UpdateOp // a retry
			return nil
		}
		c := *ns // views may hold ns
		if ch.Description != nil {
			c.Description = *ch.Description
		}
		if ttl != nil {
			v := *ttl
			c.SOATTL = &v
		}
		now := r.nowMillis()
		c.Updated, c.UpdaterID, c.UpdateOp = now, in.UpdaterRequestId, opID
		op := &operation{ID: opID, Type: "UPDATE_NAMESPACE", Targets: map[string]string{"NAMESPACE": ns.ID}, Created: now}
		if err := s.roomFor(nsBytes(&c)-nsBytes(ns)+opBytes(op), codeInvalidInput); err != nil {
			return err
		}
		s.changedNamespace(&c, nsBytes(ns))
		s.addOp(op, r.lim.Operations)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return operationIDOut{opID}, nil
}

type updateServiceIn struct {
	Id      string
	Service *struct {
		Description       *string
		DnsConfig         *struct{ DnsRecords []dnsRecordJSON }
		HealthCheckConfig *healthCheckJSON
	}
}

// updateService changes a service's description, DNS records' TTLs and
// types, and health check. As in AWS, a service's HealthCheckConfig is
// removed when the request omits it; its custom health check stays.
func (r *Registry) updateService(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in updateServiceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkRequired("Id", in.Id, 255); err != nil {
		return nil, err
	}
	ch := in.Service
	if ch == nil {
		return nil, invalid("Service is required")
	}
	if ch.Description != nil {
		if err := checkDescription(*ch.Description); err != nil {
			return nil, err
		}
	}
	if ch.DnsConfig != nil {
		if err := checkDNSRecords("Service.DnsConfig.DnsRecords", ch.DnsConfig.DnsRecords); err != nil {
			return nil, err
		}
	}
	if err := checkHealthCheck(ch.HealthCheckConfig); err != nil {
		return nil, err
	}
	opID, err := r.newOpID()
	if err != nil {
		return nil, err
	}
	err = r.update(ctx, sc, func(s *state) error {
		sv, err := findService(s, in.Id)
		if err != nil {
			return err
		}
		ns := s.Namespaces[sv.NamespaceID]
		switch {
		case ch.DnsConfig != nil && sv.DNS == nil:
			return invalid("service %s has no DnsConfig to change", sv.ID)
		case ch.HealthCheckConfig != nil && (ns == nil || ns.Type == "DNS_PRIVATE"):
			return invalid("HealthCheckConfig is for services of public DNS and HTTP namespaces only")
		case ch.HealthCheckConfig != nil && sv.HasCustom:
			return invalid("service %s has a HealthCheckCustomConfig; HealthCheckConfig excludes it", sv.ID)
		}
		old := svcBytes(sv)
		c := *sv // views may hold sv
		if ch.Description != nil {
			c.Description = *ch.Description
		}
		if ch.DnsConfig != nil {
			d := *sv.DNS
			d.DnsRecords = append([]dnsRecordJSON(nil), ch.DnsConfig.DnsRecords...)
			c.DNS = &d
		}
		c.HealthCheck = ch.HealthCheckConfig
		op := &operation{ID: opID, Type: "UPDATE_SERVICE", Targets: map[string]string{"SERVICE": sv.ID}, Created: r.nowMillis()}
		if err := s.roomFor(opBytes(op), codeInvalidInput); err != nil {
			return err
		}
		if err := s.changedService(&c, old, codeInvalidInput); err != nil {
			return err
		}
		s.Services[sv.ID] = &c
		s.addOp(op, r.lim.Operations)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return operationIDOut{opID}, nil
}
