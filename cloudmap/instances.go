package cloudmap

import (
	"context"
	"maps"
	"slices"
	"strconv"
)

type registerIn struct {
	Attributes       map[string]string
	InstanceId       string
	ServiceId        string
	CreatorRequestId string
}

func (r *Registry) registerInstance(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in registerIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkInstanceID(in.InstanceId); err != nil {
		return nil, err
	}
	if err := checkRequired("ServiceId", in.ServiceId, maxIDLen); err != nil {
		return nil, err
	}
	if err := checkOptional("CreatorRequestId", in.CreatorRequestId, maxIDLen); err != nil {
		return nil, err
	}
	// Attributes is required, but the model's map has no minimum
	// length: {} registers an instance without attributes (as moto does).
	if in.Attributes == nil {
		return nil, invalid("Attributes is required")
	}
	if err := checkAttributes(in.Attributes, r.lim.Attributes); err != nil {
		return nil, err
	}
	opID, err := r.newOpID()
	if err != nil {
		return nil, err
	}
	err = r.update(ctx, sc, func(s *state) error {
		sv, err := findService(s, in.ServiceId)
		if err != nil {
			return err
		}
		opID, err = r.register(s, sv, in.InstanceId, in.Attributes, in.CreatorRequestId, opID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return operationIDOut{opID}, nil
}

// register adds or updates an instance and returns the operation's id: opID,
// or the first call's when reqID repeats it.
func (r *Registry) register(s *state, sv *service, id string, attrs map[string]string, reqID, opID string) (string, error) {
	old := sv.Instances[id]
	if reqID != "" {
		if ref, ok := s.reqs[reqID]; ok {
			if ref.service == sv.ID && ref.instance == id {
				return old.OpID, nil // a retry: the first answer, nothing changed
			}
			prev := ""
			if o := s.Services[ref.service]; o != nil && o.Instances[ref.instance] != nil {
				prev = o.Instances[ref.instance].OpID
			}
			return "", &apiError{Code: codeDuplicateRequest, DuplicateOperationID: prev,
				Message: "CreatorRequestId " + quote(reqID) + " already registered instance " + quote(ref.instance) + " of service " + ref.service}
		}
	}
	if sv.DNS != nil {
		for _, rec := range sv.DNS.DnsRecords {
			if (rec.Type == "A" || rec.Type == "SRV") && attrs["AWS_INSTANCE_IPV4"] == "" && attrs["AWS_INSTANCE_IPV6"] == "" {
				return "", invalid("service %s has a DNS %s record: AWS_INSTANCE_IPV4 or AWS_INSTANCE_IPV6 is required", sv.ID, rec.Type)
			}
			if rec.Type == "AAAA" && attrs["AWS_INSTANCE_IPV6"] == "" {
				return "", invalid("service %s has a DNS AAAA record: AWS_INSTANCE_IPV6 is required", sv.ID)
			}
			if rec.Type == "SRV" && attrs["AWS_INSTANCE_PORT"] == "" {
				return "", invalid("service %s has a DNS SRV record: AWS_INSTANCE_PORT is required", sv.ID)
			}
			if rec.Type == "CNAME" && attrs["AWS_INSTANCE_CNAME"] == "" {
				return "", invalid("service %s has a DNS CNAME record: AWS_INSTANCE_CNAME is required", sv.ID)
			}
		}
	}
	if old == nil {
		if len(sv.Instances) >= r.lim.InstancesPerService {
			return "", &apiError{Code: codeResourceLimitExceeded, Message: "at most " + strconv.Itoa(r.lim.InstancesPerService) + " instances per service"}
		}
		if s.instanceCount(sv.NamespaceID) >= r.lim.InstancesPerNamespace {
			return "", &apiError{Code: codeResourceLimitExceeded, Message: "at most " + strconv.Itoa(r.lim.InstancesPerNamespace) + " instances per namespace"}
		}
	}
	in := &instance{ID: id, Attrs: maps.Clone(attrs), RequestID: reqID, OpID: opID}
	if old != nil {
		// Registering again changes the attributes, not the health.
		in.Unhealthy = old.Unhealthy
	} else {
		// AWS_INIT_HEALTH_STATUS sets the first custom health status
		// (HEALTHY when absent).
		in.Unhealthy = attrs["AWS_INIT_HEALTH_STATUS"] == "UNHEALTHY"
	}
	op := &operation{ID: opID, Type: "REGISTER_INSTANCE", Targets: map[string]string{"INSTANCE": id, "SERVICE": sv.ID}, Created: r.nowMillis()}
	if err := s.roomFor(opBytes(op), codeResourceLimitExceeded); err != nil {
		return "", err
	}
	if err := s.putInstance(sv, in, codeResourceLimitExceeded); err != nil {
		return "", err
	}
	s.addOp(op, r.lim.Operations)
	return opID, nil
}

type instanceIn struct {
	InstanceId string
	ServiceId  string
	Status     string
}

func checkInstanceIn(in instanceIn) error {
	if err := checkInstanceID(in.InstanceId); err != nil {
		return err
	}
	return checkRequired("ServiceId", in.ServiceId, maxIDLen)
}

func findInstance(s *state, serviceID, id string) (*service, *instance, error) {
	sv, err := findService(s, serviceID)
	if err != nil {
		return nil, nil, err
	}
	in, ok := sv.Instances[id]
	if !ok {
		return sv, nil, notFound(codeInstanceNotFound, "instance", id)
	}
	return sv, in, nil
}

func (r *Registry) deregisterInstance(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in instanceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkInstanceIn(in); err != nil {
		return nil, err
	}
	opID, err := r.newOpID()
	if err != nil {
		return nil, err
	}
	err = r.update(ctx, sc, func(s *state) error {
		sv, _, err := findInstance(s, in.ServiceId, in.InstanceId)
		if err != nil {
			return err
		}
		r.deregister(s, sv, in.InstanceId, opID)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return operationIDOut{opID}, nil
}

func (r *Registry) deregister(s *state, sv *service, id, opID string) {
	s.deleteInstance(sv, id)
	s.addOp(&operation{ID: opID, Type: "DEREGISTER_INSTANCE", Targets: map[string]string{"INSTANCE": id, "SERVICE": sv.ID}, Created: r.nowMillis()}, r.lim.Operations)
}

type instanceJSON struct {
	Id               string
	Attributes       map[string]string
	CreatedByAccount string
	CreatorRequestId string `json:",omitempty"`
}

func (r *Registry) getInstance(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in instanceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkInstanceIn(in); err != nil {
		return nil, err
	}
	var out struct {
		Instance      instanceJSON
		ResourceOwner string
	}
	err := r.view(ctx, sc, func(s *state) error {
		_, inst, err := findInstance(s, in.ServiceId, in.InstanceId)
		if err != nil {
			return err
		}
		out.Instance = instanceJSON{Id: inst.ID, Attributes: inst.Attrs, CreatedByAccount: sc.Account, CreatorRequestId: inst.RequestID}
		out.ResourceOwner = sc.Account
		return nil
	})
	return out, err
}

// sortedIDs lists a service's instance ids in order.
func sortedIDs(sv *service) []string {
	return slices.Sorted(maps.Keys(sv.Instances))
}

func (r *Registry) listInstances(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in listIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkRequired("ServiceId", in.ServiceId, maxIDLen); err != nil {
		return nil, err
	}
	max, err := checkMaxResults(in.MaxResults, 100, 100)
	if err != nil {
		return nil, err
	}
	var out struct {
		Instances     []instanceJSON
		NextToken     string `json:",omitempty"`
		ResourceOwner string
	}
	err = r.view(ctx, sc, func(s *state) error {
		sv, err := findService(s, in.ServiceId)
		if err != nil {
			return err
		}
		ids, next, err := page(sortedIDs(sv), in.NextToken, max)
		if err != nil {
			return err
		}
		out.Instances, out.NextToken, out.ResourceOwner = []instanceJSON{}, next, sc.Account
		for _, id := range ids {
			inst := sv.Instances[id]
			out.Instances = append(out.Instances, instanceJSON{Id: id, Attributes: inst.Attrs, CreatedByAccount: sc.Account})
		}
		return nil
	})
	return out, err
}

// health is an instance's status as GetInstancesHealthStatus and
// DiscoverInstances report it: UNKNOWN for a service without a custom
// health check.
func health(sv *service, in *instance) string {
	switch {
	case !sv.HasCustom:
		return "UNKNOWN"
	case in.Unhealthy:
		return "UNHEALTHY"
	default:
		return "HEALTHY"
	}
}

type healthIn struct {
	ServiceId  string
	Instances  []string
	MaxResults *int32
	NextToken  string
}

func (r *Registry) getInstancesHealthStatus(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in healthIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkRequired("ServiceId", in.ServiceId, maxIDLen); err != nil {
		return nil, err
	}
	if in.Instances != nil && (len(in.Instances) == 0 || len(in.Instances) > maxFilterValues) {
		return nil, invalid("Instances must hold 1 to %d instance ids", maxFilterValues)
	}
	for _, id := range in.Instances {
		if err := checkInstanceID(id); err != nil {
			return nil, err
		}
	}
	max, err := checkMaxResults(in.MaxResults, 100, 100)
	if err != nil {
		return nil, err
	}
	var out struct {
		NextToken string `json:",omitempty"`
		Status    map[string]string
	}
	err = r.view(ctx, sc, func(s *state) error {
		sv, err := findService(s, in.ServiceId)
		if err != nil {
			return err
		}
		ids := sortedIDs(sv)
		if in.Instances != nil {
			ids = slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(in.Instances)))))
			for _, id := range ids {
				if sv.Instances[id] == nil {
					return notFound(codeInstanceNotFound, "instance", id)
				}
			}
		}
		ids, out.NextToken, err = page(ids, in.NextToken, max)
		if err != nil {
			return err
		}
		out.Status = make(map[string]string, len(ids))
		for _, id := range ids {
			out.Status[id] = health(sv, sv.Instances[id])
		}
		return nil
	})
	return out, err
}

func (r *Registry) updateInstanceCustomHealthStatus(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in instanceIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkInstanceIn(in); err != nil {
		return nil, err
	}
	if in.Status != "HEALTHY" && in.Status != "UNHEALTHY" {
		return nil, invalid("Status %s is not HEALTHY or UNHEALTHY", quote(in.Status))
	}
	err := r.update(ctx, sc, func(s *state) error {
		sv, err := findService(s, in.ServiceId)
		if err != nil {
			return err
		}
		if !sv.HasCustom {
			return &apiError{Code: codeCustomHealthNotFound, Message: "service " + sv.ID + " has no HealthCheckCustomConfig"}
		}
		inst, ok := sv.Instances[in.InstanceId]
		if !ok {
			return notFound(codeInstanceNotFound, "instance", in.InstanceId)
		}
		s.setHealth(sv, inst, in.Status == "UNHEALTHY")
		return nil
	})
	return struct{}{}, err
}

type operationJSON struct {
	CreateDate   any
	Id           string
	OwnerAccount string
	Status       string
	Targets      map[string]string
	Type         string
	UpdateDate   any
}

func (r *Registry) getOperation(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in struct{ OperationId, OwnerAccount string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkRequired("OperationId", in.OperationId, 255); err != nil {
		return nil, err
	}
	var out struct{ Operation operationJSON }
	err := r.view(ctx, sc, func(s *state) error {
		op, ok := s.Ops[in.OperationId]
		if !ok || (in.OwnerAccount != "" && in.OwnerAccount != sc.Account) {
			return notFound(codeOperationNotFound, "operation", in.OperationId)
		}
		status, updated := r.opStatus(op)
		out.Operation = operationJSON{CreateDate: epoch(op.Created), Id: op.ID, OwnerAccount: sc.Account,
			Status: status, Targets: op.Targets, Type: op.Type, UpdateDate: epoch(updated)}
		return nil
	})
	return out, err
}

// findByName finds a service by its namespace's name and its own.
func findByName(s *state, nsName, svcName string) (*service, error) {
	var ns *namespace
	for _, n := range s.Namespaces {
		if n.Name == nsName {
			ns = n
			break
		}
	}
	if ns == nil {
		return nil, &apiError{Code: codeNamespaceNotFound, Message: "namespace " + quote(nsName) + " not found"}
	}
	for _, sv := range s.Services {
		if sv.NamespaceID == ns.ID && sv.Name == svcName {
			return sv, nil
		}
	}
	return nil, &apiError{Code: codeServiceNotFound, Message: "service " + quote(svcName) + " not found in namespace " + quote(nsName)}
}
