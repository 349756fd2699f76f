package cloudmap

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Wire shapes of namespaces (types.Namespace, types.NamespaceSummary).
type (
	soaJSON           struct{ TTL *int64 }
	dnsPropertiesJSON struct {
		HostedZoneId *string  `json:",omitempty"`
		SOA          *soaJSON `json:",omitempty"`
	}
	httpPropertiesJSON struct{ HttpName string }
	nsPropertiesJSON   struct {
		DnsProperties  *dnsPropertiesJSON
		HttpProperties *httpPropertiesJSON
	}
	namespaceJSON struct {
		Arn              string
		CreateDate       json.Number
		CreatorRequestId string `json:",omitempty"`
		Description      string `json:",omitempty"`
		Id               string
		Name             string
		Properties       nsPropertiesJSON
		ResourceOwner    string
		ServiceCount     int
		Type             string
	}
)

func (r *Registry) namespaceJSON(sc Scope, s *state, ns *namespace, summary bool) namespaceJSON {
	n := 0
	for _, sv := range s.Services {
		if sv.NamespaceID == ns.ID {
			n++
		}
	}
	j := namespaceJSON{Arn: arn(sc, "namespace", ns.ID), CreateDate: epoch(ns.Created), Description: ns.Description,
		Id: ns.ID, Name: ns.Name, ResourceOwner: sc.Account, ServiceCount: n, Type: ns.Type,
		Properties: nsPropertiesJSON{HttpProperties: &httpPropertiesJSON{HttpName: ns.Name}}}
	if !summary {
		j.CreatorRequestId = ns.RequestID
	}
	// An HTTP namespace's DnsProperties is {}, as in the model's
	// GetNamespace and ListNamespaces examples.
	j.Properties.DnsProperties = &dnsPropertiesJSON{}
	if ns.Type == "DNS_PRIVATE" || ns.Type == "DNS_PUBLIC" {
		zone := "Z" + strings.ToUpper(strings.TrimPrefix(ns.ID, "ns-"))
		j.Properties.DnsProperties.HostedZoneId = &zone
		if ns.SOATTL != nil {
			j.Properties.DnsProperties.SOA = &soaJSON{TTL: ns.SOATTL}
		}
	}
	return j
}

type tagJSON struct{ Key, Value string }

type createNamespaceIn struct {
	Name             string
	CreatorRequestId string
	Description      string
	Vpc              string
	Properties       *struct {
		DnsProperties *struct{ SOA *soaJSON }
	}
	Tags []tagJSON
}

type operationIDOut struct{ OperationId string }

func (r *Registry) createHTTPNamespace(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in createNamespaceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkNamespaceName("HTTP", in.Name); err != nil {
		return nil, err
	}
	if in.Vpc != "" || in.Properties != nil {
		return nil, invalid("an HTTP namespace takes no Vpc or DNS properties")
	}
	return r.createNamespace(ctx, sc, in, "HTTP")
}

func (r *Registry) createPrivateDNSNamespace(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in createNamespaceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkNamespaceName("DNS_PRIVATE", in.Name); err != nil {
		return nil, err
	}
	if err := checkRequired("Vpc", in.Vpc, maxIDLen); err != nil {
		return nil, err
	}
	return r.createNamespace(ctx, sc, in, "DNS_PRIVATE")
}

func (r *Registry) createNamespace(ctx context.Context, sc Scope, in createNamespaceIn, typ string) (any, error) {
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
	var ttl *int64
	if in.Properties != nil && in.Properties.DnsProperties != nil && in.Properties.DnsProperties.SOA != nil {
		if ttl = in.Properties.DnsProperties.SOA.TTL; checkTTL(ttl) != nil {
			return nil, invalid("Properties.DnsProperties.SOA.TTL must be between 0 and 2147483647")
		}
	}
	id, err := r.newID("ns-", 16)
	if err != nil {
		return nil, err
	}
	opID, err := r.newOpID()
	if err != nil {
		return nil, err
	}
	err = r.update(ctx, sc, func(s *state) error {
		for _, ns := range s.Namespaces {
			if in.CreatorRequestId != "" && ns.RequestID == in.CreatorRequestId {
				if ns.Name == in.Name && ns.Type == typ {
					opID = ns.OpID // a retry: the first answer again
					return nil
				}
				return &apiError{Code: codeDuplicateRequest, DuplicateOperationID: ns.OpID,
					Message: "CreatorRequestId " + quote(in.CreatorRequestId) + " already created namespace " + quote(ns.Name)}
			}
		}
		for _, ns := range s.Namespaces {
			if ns.Name == in.Name {
				return &apiError{Code: codeNamespaceAlreadyExists, NamespaceID: ns.ID, CreatorRequestID: ns.RequestID,
					Message: "namespace " + quote(in.Name) + " already exists as " + ns.ID}
			}
		}
		if len(s.Namespaces) >= r.lim.Namespaces {
			return &apiError{Code: codeResourceLimitExceeded, Message: "at most " + strconv.Itoa(r.lim.Namespaces) + " namespaces per account and region"}
		}
		if err := s.roomForTags(id, tags, codeResourceLimitExceeded); err != nil {
			return err
		}
		now := r.nowMillis()
		ns := &namespace{ID: id, Name: in.Name, Type: typ, Description: in.Description,
			RequestID: in.CreatorRequestId, OpID: opID, Vpc: in.Vpc, SOATTL: ttl, Created: now}
		op := &operation{ID: opID, Type: "CREATE_NAMESPACE", Targets: map[string]string{"NAMESPACE": id}, Created: now}
		if err := s.roomFor(tagsBytes(tags)-tagsBytes(s.Tags[id])+opBytes(op), codeResourceLimitExceeded); err != nil {
			return err
		}
		if err := s.putNamespace(ns, codeResourceLimitExceeded); err != nil {
			return err
		}
		s.setTags(id, tags)
		s.addOp(op, r.lim.Operations)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return operationIDOut{opID}, nil
}

// idIn is the input of the calls that take one resource's Id.
type idIn struct{ Id string }

// decodeID decodes and checks the input of a call that takes one Id
// (GetNamespace, DeleteNamespace, GetService, DeleteService).
func decodeID(body []byte) (idIn, error) {
	var in idIn
	if err := decode(body, &in); err != nil {
		return idIn{}, err
	}
	if err := checkRequired("Id", in.Id, 255); err != nil {
		return idIn{}, err
	}
	return in, nil
}

// idFromARN returns the id at the end of an ARN
// ("arn:aws:servicediscovery:…:namespace/ns-1" is "ns-1"), or id itself
// when it is not an ARN.
func idFromARN(id string) string {
	if i := strings.LastIndexByte(id, '/'); strings.HasPrefix(id, "arn:") && i >= 0 {
		return id[i+1:]
	}
	return id
}

// findNamespace finds a namespace by id or ARN.
func findNamespace(s *state, id string) (*namespace, error) {
	return findByID(s.Namespaces, id, codeNamespaceNotFound, "namespace")
}

// findByID finds the resource m holds under id or the id of ARN id; code
// and what make the not-found error (e.g. NamespaceNotFound, "namespace").
func findByID[T any](m map[string]*T, id, code, what string) (*T, error) {
	id = idFromARN(id)
	v, ok := m[id]
	if !ok {
		return nil, notFound(code, what, id)
	}
	return v, nil
}

func (r *Registry) getNamespace(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, err := decodeID(body)
	if err != nil {
		return nil, err
	}
	var out struct{ Namespace namespaceJSON }
	err = r.view(ctx, sc, func(s *state) error {
		ns, err := findNamespace(s, in.Id)
		if err != nil {
			return err
		}
		out.Namespace = r.namespaceJSON(sc, s, ns, false)
		return nil
	})
	return out, err
}

func (r *Registry) deleteNamespace(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, err := decodeID(body)
	if err != nil {
		return nil, err
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
		for _, sv := range s.Services {
			if sv.NamespaceID == ns.ID {
				return &apiError{Code: codeResourceInUse, Message: "namespace " + ns.ID + " still has services (" + sv.ID + ")"}
			}
		}
		s.deleteNamespace(ns)
		s.addOp(&operation{ID: opID, Type: "DELETE_NAMESPACE", Targets: map[string]string{"NAMESPACE": ns.ID}, Created: r.nowMillis()}, r.lim.Operations)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return operationIDOut{opID}, nil
}

type filterJSON struct {
	Name      string
	Values    []string
	Condition string
}

type listIn struct {
	Filters    []filterJSON
	MaxResults *int32
	NextToken  string
	ServiceId  string
}

// match applies a filter's condition to one value (EQ by default).
// matchAll reports whether every filter holds for the value valueOf
// gives its name. Every resource here is the caller's own, so a
// RESOURCE_OWNER filter holds when it asks for SELF.
func matchAll(filters []filterJSON, valueOf func(name string) string) bool {
	for _, f := range filters {
		v := "SELF"
		if f.Name != "RESOURCE_OWNER" {
			v = valueOf(f.Name)
		}
		if !f.match(v) {
			return false
		}
	}
	return true
}

func (f filterJSON) match(v string) bool {
	switch f.Condition {
	case "BETWEEN":
		return v == "in" // the caller compares the range
	case "IN":
		return slices.Contains(f.Values, v)
	case "BEGINS_WITH":
		return strings.HasPrefix(v, f.Values[0])
	default:
		return v == f.Values[0]
	}
}

func checkFilter(f filterJSON, names []string, conds []string) error {
	if !slices.Contains(names, f.Name) {
		return invalid("filter Name %s is not one of %s", quote(f.Name), strings.Join(names, ", "))
	}
	if f.Condition == "" {
		f.Condition = "EQ"
	}
	if !slices.Contains(conds, f.Condition) {
		return invalid("filter %s: Condition %s is not one of %s", f.Name, quote(f.Condition), strings.Join(conds, ", "))
	}
	switch {
	case f.Condition == "BETWEEN" && len(f.Values) != 2:
		return invalid("filter %s: BETWEEN takes two Values", f.Name)
	case len(f.Values) == 0 || len(f.Values) > maxFilterValues || (f.Condition != "IN" && f.Condition != "BETWEEN" && len(f.Values) != 1):
		return invalid("filter %s: Values must hold one value (%s), or 1 to %d for IN", f.Name, f.Condition, maxFilterValues)
	}
	for _, v := range f.Values {
		if v == "" || len(v) > 255 {
			return invalid("filter %s: each value is 1 to 255 characters", f.Name)
		}
	}
	return nil
}

// filterRule is a filter name a List operation takes, with the
// conditions it allows.
type filterRule struct {
	name  string
	conds []string
}

// decodeList reads the request of a filtered List operation: its body,
// MaxResults (at most 100, 100 when absent) and each filter, checked
// against rules. It returns the request and its page size.
func decodeList(body []byte, rules []filterRule) (listIn, int, error) {
	var in listIn
	if err := decode(body, &in); err != nil {
		return in, 0, err
	}
	max, err := checkMaxResults(in.MaxResults, 100, 100)
	if err != nil {
		return in, 0, err
	}
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.name
	}
	for _, f := range in.Filters {
		var conds []string
		for _, r := range rules {
			if r.name == f.Name {
				conds = r.conds
			}
		}
		if err := checkFilter(f, names, conds); err != nil {
			return in, 0, err
		}
	}
	return in, max, nil
}

// page cuts a sorted list at NextToken (an offset) and returns the next token.
func page[T any](all []T, token string, max int) ([]T, string, error) {
	start := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 || n > len(all) {
			return nil, "", invalid("NextToken %s is not one this registry gave", quote(token))
		}
		start = n
	}
	end := min(start+max, len(all))
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return all[start:end], next, nil
}

// namespaceFilters are ListNamespaces's filters.
var namespaceFilters = []filterRule{
	{"TYPE", []string{"EQ", "IN"}},
	{"NAME", []string{"EQ", "BEGINS_WITH"}},
	{"HTTP_NAME", []string{"EQ", "BEGINS_WITH"}},
	{"RESOURCE_OWNER", []string{"EQ"}},
}

func (r *Registry) listNamespaces(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, max, err := decodeList(body, namespaceFilters)
	if err != nil {
		return nil, err
	}
	var out struct {
		Namespaces []namespaceJSON
		NextToken  string `json:",omitempty"`
	}
	err = r.view(ctx, sc, func(s *state) error {
		var all []namespaceJSON
		for _, ns := range s.Namespaces {
			if matchAll(in.Filters, func(name string) string {
				if name == "TYPE" {
					return ns.Type
				}
				return ns.Name // NAME, HTTP_NAME
			}) {
				all = append(all, r.namespaceJSON(sc, s, ns, true))
			}
		}
		slices.SortFunc(all, func(a, b namespaceJSON) int { return strings.Compare(a.Id, b.Id) })
		var err error
		out.Namespaces, out.NextToken, err = page(all, in.NextToken, max)
		return err
	})
	if out.Namespaces == nil {
		out.Namespaces = []namespaceJSON{}
	}
	return out, err
}
