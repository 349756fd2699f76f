package cloudmap

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

type dnsRecordJSON struct {
	TTL  *int64
	Type string
}

// dnsConfig is a service's DnsConfig (stored as sent, served back).
type dnsConfig struct {
	NamespaceId   string `json:",omitempty"`
	RoutingPolicy string `json:",omitempty"`
	DnsRecords    []dnsRecordJSON
}

type customConfigJSON struct {
	FailureThreshold *int32 `json:",omitempty"`
}

type serviceJSON struct {
	Arn                     string
	HealthCheckConfig       *healthCheckJSON `json:",omitempty"`
	CreateDate              json.Number
	CreatedByAccount        string
	CreatorRequestId        string            `json:",omitempty"`
	Description             string            `json:",omitempty"`
	DnsConfig               *dnsConfig        `json:",omitempty"`
	HealthCheckCustomConfig *customConfigJSON `json:",omitempty"`
	Id                      string
	InstanceCount           int
	Name                    string
	NamespaceId             string `json:",omitempty"`
	ResourceOwner           string
	Type                    string
}

func serviceOut(sc Scope, sv *service, summary bool) serviceJSON {
	j := serviceJSON{Arn: arn(sc, "service", sv.ID), CreateDate: epoch(sv.Created), CreatedByAccount: sc.Account,
		Description: sv.Description, DnsConfig: sv.DNS, Id: sv.ID, InstanceCount: len(sv.Instances),
		Name: sv.Name, ResourceOwner: sc.Account, Type: sv.Type, HealthCheckConfig: sv.HealthCheck}
	if sv.HasCustom {
		j.HealthCheckCustomConfig = &customConfigJSON{FailureThreshold: sv.Custom}
	}
	if !summary {
		j.CreatorRequestId, j.NamespaceId = sv.RequestID, sv.NamespaceID
	}
	return j
}

type createServiceIn struct {
	Name                    string
	CreatorRequestId        string
	Description             string
	DnsConfig               *dnsConfig
	HealthCheckConfig       *healthCheckJSON
	HealthCheckCustomConfig *customConfigJSON
	NamespaceId             string
	Tags                    []tagJSON
	Type                    string
}

func (r *Registry) createService(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in createServiceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkServiceName("Name", in.Name); err != nil {
		return nil, err
	}
	if err := checkOptional("CreatorRequestId", in.CreatorRequestId, maxIDLen); err != nil {
		return nil, err
	}
	if err := checkDescription(in.Description); err != nil {
		return nil, err
	}
	tags, err := checkTags(in.Tags, in.Name)
	if err != nil {
		return nil, err
	}
	if err := checkHealthCheck(in.HealthCheckConfig); err != nil {
		return nil, err
	}
	if in.HealthCheckConfig != nil && in.HealthCheckCustomConfig != nil {
		return nil, invalid("HealthCheckConfig and HealthCheckCustomConfig exclude each other")
	}
	if in.Type != "" && in.Type != "HTTP" {
		return nil, invalid("Type %s: the only option is HTTP", quote(in.Type))
	}
	nsID := in.NamespaceId
	if nsID == "" && in.DnsConfig != nil {
		nsID = in.DnsConfig.NamespaceId
	}
	if err := checkRequired("NamespaceId", nsID, maxIDLen); err != nil {
		return nil, err
	}
	if c := in.HealthCheckCustomConfig; c != nil && c.FailureThreshold != nil && (*c.FailureThreshold < 1 || *c.FailureThreshold > 10) {
		return nil, invalid("HealthCheckCustomConfig.FailureThreshold %d is not between 1 and 10", *c.FailureThreshold)
	}
	if d := in.DnsConfig; d != nil {
		if err := checkDNSRecords("DnsConfig.DnsRecords", d.DnsRecords); err != nil {
			return nil, err
		}
		if d.RoutingPolicy != "" && d.RoutingPolicy != "MULTIVALUE" && d.RoutingPolicy != "WEIGHTED" {
			return nil, invalid("DnsConfig.RoutingPolicy %s is not MULTIVALUE or WEIGHTED", quote(d.RoutingPolicy))
		}
	}
	id, err := r.newID("srv-", 16)
	if err != nil {
		return nil, err
	}
	var out struct{ Service serviceJSON }
	err = r.update(ctx, sc, func(s *state) error {
		ns, err := findNamespace(s, nsID)
		if err != nil {
			return err
		}
		typ := "HTTP"
		switch {
		case ns.Type == "HTTP" && in.DnsConfig != nil:
			return invalid("namespace %s is an HTTP namespace: a service in it takes no DnsConfig", ns.ID)
		case ns.Type == "DNS_PRIVATE" && in.HealthCheckConfig != nil:
			return invalid("namespace %s is a private DNS namespace: HealthCheckConfig is for public DNS and HTTP namespaces only", ns.ID)
		case ns.Type != "HTTP" && in.Type != "HTTP":
			if in.DnsConfig == nil {
				return invalid("namespace %s is a DNS namespace: DnsConfig is required unless Type is HTTP", ns.ID)
			}
			typ = "DNS_HTTP"
		case in.DnsConfig != nil:
			return invalid("a service of Type HTTP takes no DnsConfig")
		}
		for _, sv := range s.Services {
			if sv.NamespaceID != ns.ID || sv.Name != in.Name {
				continue
			}
			if in.CreatorRequestId != "" && sv.RequestID == in.CreatorRequestId {
				out.Service = serviceOut(sc, sv, false) // a retry
				return nil
			}
			return &apiError{Code: codeServiceAlreadyExists, ServiceID: sv.ID, ServiceArn: arn(sc, "service", sv.ID),
				CreatorRequestID: sv.RequestID, Message: "service " + quote(in.Name) + " already exists in namespace " + ns.ID + " as " + sv.ID}
		}
		if len(s.Services) >= r.lim.Services {
			return &apiError{Code: codeResourceLimitExceeded, Message: "at most " + strconv.Itoa(r.lim.Services) + " services per account and region"}
		}
		if err := s.roomForTags(id, tags, codeResourceLimitExceeded); err != nil {
			return err
		}
		sv := &service{ID: id, Name: in.Name, NamespaceID: ns.ID, Type: typ, Description: in.Description,
			RequestID: in.CreatorRequestId, Created: r.nowMillis(), HealthCheck: in.HealthCheckConfig}
		if in.DnsConfig != nil {
			d := *in.DnsConfig
			d.NamespaceId = ns.ID
			if d.RoutingPolicy == "" {
				d.RoutingPolicy = "MULTIVALUE"
			}
			sv.DNS = &d
		}
		if in.HealthCheckCustomConfig != nil {
			sv.HasCustom, sv.Custom = true, in.HealthCheckCustomConfig.FailureThreshold
		}
		if err := s.putService(sv, codeResourceLimitExceeded); err != nil {
			return err
		}
		s.setTags(id, tags)
		out.Service = serviceOut(sc, sv, false)
		return nil
	})
	return out, err
}

// findService finds a service by id or ARN.
func findService(s *state, id string) (*service, error) {
	return findByID(s.Services, id, codeServiceNotFound, "service")
}

func (r *Registry) getService(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, err := decodeID(body)
	if err != nil {
		return nil, err
	}
	var out struct{ Service serviceJSON }
	err = r.view(ctx, sc, func(s *state) error {
		sv, err := findService(s, in.Id)
		if err == nil {
			out.Service = serviceOut(sc, sv, false)
		}
		return err
	})
	return out, err
}

func (r *Registry) deleteService(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, err := decodeID(body)
	if err != nil {
		return nil, err
	}
	err = r.update(ctx, sc, func(s *state) error {
		sv, err := findService(s, in.Id)
		if err != nil {
			return err
		}
		if len(sv.Instances) > 0 {
			return &apiError{Code: codeResourceInUse, Message: "service " + sv.ID + " still has " + strconv.Itoa(len(sv.Instances)) + " registered instances"}
		}
		s.deleteService(sv)
		return nil
	})
	return struct{}{}, err
}

// serviceFilters are ListServices's filters.
var serviceFilters = []filterRule{
	{"NAMESPACE_ID", []string{"EQ", "IN"}},
	{"RESOURCE_OWNER", []string{"EQ"}},
}

func (r *Registry) listServices(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, max, err := decodeList(body, serviceFilters)
	if err != nil {
		return nil, err
	}
	for i, f := range in.Filters {
		if f.Name == "NAMESPACE_ID" {
			vals := make([]string, len(f.Values))
			for j, v := range f.Values {
				vals[j] = idFromARN(v) // the model: a namespace's ID or ARN
			}
			in.Filters[i].Values = vals
		}
	}
	var out struct {
		NextToken string `json:",omitempty"`
		Services  []serviceJSON
	}
	err = r.view(ctx, sc, func(s *state) error {
		var all []serviceJSON
		for _, sv := range s.Services {
			if matchAll(in.Filters, func(string) string { return sv.NamespaceID }) { // NAMESPACE_ID, by id or ARN
				all = append(all, serviceOut(sc, sv, true))
			}
		}
		slices.SortFunc(all, func(a, b serviceJSON) int { return strings.Compare(a.Id, b.Id) })
		var err error
		out.Services, out.NextToken, err = page(all, in.NextToken, max)
		return err
	})
	if out.Services == nil {
		out.Services = []serviceJSON{}
	}
	return out, err
}
