package cloudmap

import (
	"context"
)

type discoverIn struct {
	NamespaceName      string
	ServiceName        string
	HealthStatus       string
	MaxResults         *int32
	OptionalParameters map[string]string
	OwnerAccount       string
	QueryParameters    map[string]string
}

func (in *discoverIn) check() error {
	if err := checkRequired("NamespaceName", in.NamespaceName, maxNameLen); err != nil {
		return err
	}
	if err := checkServiceName("ServiceName", in.ServiceName); err != nil {
		return err
	}
	return checkOptional("OwnerAccount", in.OwnerAccount, 12)
}

func checkParams(field string, m map[string]string) error {
	for k, v := range m {
		if !printable(k, maxAttrKeyLen) {
			return invalid("%s key %s must be 1 to %d printable ASCII characters without spaces", field, quote(k), maxAttrKeyLen)
		}
		if len(v) > maxAttrValueLen {
			return invalid("%s[%s]: value longer than %d characters", field, quote(k), maxAttrValueLen)
		}
	}
	return nil
}

type httpInstanceJSON struct {
	Attributes    map[string]string
	HealthStatus  string
	InstanceId    string
	NamespaceName string
	ServiceName   string
}

// matches reports whether attrs hold every key of params with its value.
func matches(attrs, params map[string]string) bool {
	for k, v := range params {
		if got, ok := attrs[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (r *Registry) discoverInstances(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in discoverIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	switch in.HealthStatus {
	case "", "HEALTHY", "UNHEALTHY", "ALL", "HEALTHY_OR_ELSE_ALL":
	default:
		return nil, invalid("HealthStatus %s is not HEALTHY, UNHEALTHY, ALL or HEALTHY_OR_ELSE_ALL", quote(in.HealthStatus))
	}
	max, err := checkMaxResults(in.MaxResults, 100, 1000)
	if err != nil {
		return nil, err
	}
	if err := checkParams("QueryParameters", in.QueryParameters); err != nil {
		return nil, err
	}
	if err := checkParams("OptionalParameters", in.OptionalParameters); err != nil {
		return nil, err
	}
	var out struct {
		Instances         []httpInstanceJSON
		InstancesRevision int64
	}
	var picked []*instance
	var sv *service
	err = r.store.view(ctx, sc.key(), true, func(s *state) error {
		if in.OwnerAccount != "" && in.OwnerAccount != sc.Account {
			return &apiError{Code: codeNamespaceNotFound, Message: "namespace " + quote(in.NamespaceName) + " not found in account " + quote(in.OwnerAccount)}
		}
		var err error
		if sv, err = findByName(s, in.NamespaceName, in.ServiceName); err != nil {
			return err
		}
		out.InstancesRevision = sv.Revision
		picked = discover(sv, in)
		return nil
	})
	if err != nil {
		return out, err
	}
	// AWS answers in random order, which spreads clients over the
	// instances when MaxResults is below their number.
	if err := r.shuffle(picked); err != nil {
		return nil, err
	}
	out.Instances = make([]httpInstanceJSON, 0, min(len(picked), max))
	for _, inst := range picked[:min(len(picked), max)] {
		out.Instances = append(out.Instances, httpInstanceJSON{Attributes: inst.Attrs, HealthStatus: health(sv, inst),
			InstanceId: inst.ID, NamespaceName: in.NamespaceName, ServiceName: sv.Name})
	}
	return out, err
}

// discover selects a service's instances as DiscoverInstances does: every
// QueryParameter must match; the OptionalParameters narrow the result only
// if some instance matches them too; the health filter applies only to a
// service with a custom health check. The instances come in id order.
func discover(sv *service, in discoverIn) []*instance {
	var picked []*instance
	for _, id := range sortedIDs(sv) {
		if inst := sv.Instances[id]; matches(inst.Attrs, in.QueryParameters) {
			picked = append(picked, inst)
		}
	}
	if len(in.OptionalParameters) > 0 {
		var narrowed []*instance
		for _, inst := range picked {
			if matches(inst.Attrs, in.OptionalParameters) {
				narrowed = append(narrowed, inst)
			}
		}
		if len(narrowed) > 0 {
			picked = narrowed
		}
	}
	if sv.HasCustom {
		want := in.HealthStatus
		if want == "" {
			want = "ALL"
		}
		var healthy, unhealthy []*instance
		for _, inst := range picked {
			if inst.Unhealthy {
				unhealthy = append(unhealthy, inst)
			} else {
				healthy = append(healthy, inst)
			}
		}
		switch want {
		case "HEALTHY":
			picked = healthy
		case "UNHEALTHY":
			picked = unhealthy
		case "HEALTHY_OR_ELSE_ALL":
			if len(healthy) > 0 {
				picked = healthy
			}
		}
	}
	return picked
}

func (r *Registry) discoverInstancesRevision(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in discoverIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	var out struct{ InstancesRevision int64 }
	err := r.store.view(ctx, sc.key(), true, func(s *state) error {
		if in.OwnerAccount != "" && in.OwnerAccount != sc.Account {
			return &apiError{Code: codeNamespaceNotFound, Message: "namespace " + quote(in.NamespaceName) + " not found in account " + quote(in.OwnerAccount)}
		}
		sv, err := findByName(s, in.NamespaceName, in.ServiceName)
		if err == nil {
			out.InstancesRevision = sv.Revision
		}
		return err
	})
	return out, err
}
