package cloudmap

import (
	"context"
	"errors"
	"strconv"
)

// Errors of the Go API, wrapped with the name that was not found or the
// reason an input was refused.
var (
	// ErrInvalidInput: a name, id or attribute the API would refuse.
	ErrInvalidInput = errors.New("cloudmap: invalid input")
	// ErrLimitExceeded: a namespace, service or instance beyond Limits.
	ErrLimitExceeded = errors.New("cloudmap: limit exceeded")
)

// goError turns an API error into one wrapping a sentinel of this package.
func goError(err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Code {
	case codeResourceLimitExceeded:
		return errors.Join(ErrLimitExceeded, err)
	default:
		return errors.Join(ErrInvalidInput, err)
	}
}

// RegisterInstance registers instance id, with attrs, in the service named
// service of the namespace named namespace in scope sc, as the
// RegisterInstance API does (the revision grows; an existing instance gets
// the new attributes). A missing namespace or service is created first, as
// an HTTP namespace and an HTTP service with a custom health check, so a
// pool can name them in its config alone. Errors wrap [ErrInvalidInput] or
// [ErrLimitExceeded], or are the store's.
func (r *Registry) RegisterInstance(ctx context.Context, sc Scope, namespace, service, id string, attrs map[string]string) error {
	sc = sc.normal()
	r.markKnown(sc) // the autoscaler's: never refused for others' room
	if err := checkRequired("namespace", namespace, maxNameLen); err != nil {
		return goError(err)
	}
	if err := checkServiceName("service", service); err != nil {
		return goError(err)
	}
	if err := checkInstanceID(id); err != nil {
		return goError(err)
	}
	if err := checkAttributes(attrs, r.lim.Attributes); err != nil {
		return goError(err)
	}
	ids := make([]string, 3)
	for i, p := range []string{"ns-", "srv-"} {
		var err error
		if ids[i], err = r.newID(p, 16); err != nil {
			return err
		}
	}
	var err error
	if ids[2], err = r.newOpID(); err != nil {
		return err
	}
	return goError(r.update(ctx, sc, func(s *state) error {
		sv, err := findByName(s, namespace, service)
		var ae *apiError
		if errors.As(err, &ae) && (ae.Code == codeNamespaceNotFound || ae.Code == codeServiceNotFound) {
			sv, err = r.ensureService(s, ae.Code == codeNamespaceNotFound, namespace, service, ids[0], ids[1])
		}
		if err != nil {
			return err
		}
		_, err = r.register(s, sv, id, attrs, "", ids[2])
		return err
	}))
}

// ensureService creates the namespace (when newNS) and service that
// RegisterInstance names, after checking the limits.
func (r *Registry) ensureService(s *state, newNS bool, nsName, svcName, nsID, svID string) (*service, error) {
	now := r.nowMillis()
	if newNS && len(s.Namespaces) >= r.lim.Namespaces {
		return nil, &apiError{Code: codeResourceLimitExceeded, Message: "at most " + strconv.Itoa(r.lim.Namespaces) + " namespaces per account and region"}
	}
	if len(s.Services) >= r.lim.Services {
		return nil, &apiError{Code: codeResourceLimitExceeded, Message: "at most " + strconv.Itoa(r.lim.Services) + " services per account and region"}
	}
	var ns *namespace
	if newNS {
		ns = &namespace{ID: nsID, Name: nsName, Type: "HTTP", Created: now}
		if err := s.putNamespace(ns, codeResourceLimitExceeded); err != nil {
			return nil, err
		}
	} else {
		for _, x := range s.Namespaces {
			if x.Name == nsName {
				ns = x
			}
		}
	}
	sv := &service{ID: svID, Name: svcName, NamespaceID: ns.ID, Type: "HTTP", HasCustom: true, Created: now}
	if err := s.putService(sv, codeResourceLimitExceeded); err != nil {
		return nil, err
	}
	return sv, nil
}

// DeregisterInstance removes instance id from the service named service of
// the namespace named namespace in scope sc, as the DeregisterInstance API
// does. An instance, service or namespace that is not there is not an
// error: the instance is gone either way.
func (r *Registry) DeregisterInstance(ctx context.Context, sc Scope, namespace, service, id string) error {
	sc = sc.normal()
	r.markKnown(sc)
	opID, err := r.newOpID()
	if err != nil {
		return err
	}
	return goError(r.update(ctx, sc, func(s *state) error {
		sv, err := findByName(s, namespace, service)
		if err != nil || sv.Instances[id] == nil {
			return nil
		}
		r.deregister(s, sv, id, opID)
		return nil
	}))
}
