package cloudmap

import (
	"context"
	"maps"
	"strconv"
	"strings"
)

// resourceOf finds the namespace or service an ARN of this scope names and
// returns its id.
func resourceOf(s *state, sc Scope, resARN string) (string, error) {
	if len(resARN) > 1011 || !strings.HasPrefix(resARN, "arn:") {
		return "", invalid("ResourceARN %s is not an ARN", quote(resARN))
	}
	id := idFromARN(resARN)
	switch {
	case resARN == arn(sc, "namespace", id) && s.Namespaces[id] != nil,
		resARN == arn(sc, "service", id) && s.Services[id] != nil:
		return id, nil
	}
	return "", &apiError{Code: codeResourceNotFound, Message: "resource " + quote(resARN) + " not found"}
}

type tagsIn struct {
	ResourceARN string
	Tags        []tagJSON
	TagKeys     []string
}

func decodeTags(body []byte) (tagsIn, error) {
	var in tagsIn
	if err := decode(body, &in); err != nil {
		return in, err
	}
	if in.ResourceARN == "" {
		return in, invalid("ResourceARN is required")
	}
	return in, nil
}

func (r *Registry) listTagsForResource(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, err := decodeTags(body)
	if err != nil {
		return nil, err
	}
	out := struct{ Tags []tagJSON }{Tags: []tagJSON{}}
	err = r.view(ctx, sc, func(s *state) error {
		id, err := resourceOf(s, sc, in.ResourceARN)
		if err == nil {
			out.Tags = append(out.Tags, s.Tags[id]...)
		}
		return err
	})
	return out, err
}

func (r *Registry) tagResource(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, err := decodeTags(body)
	if err != nil {
		return nil, err
	}
	if in.Tags == nil {
		return nil, invalid("Tags is required")
	}
	if _, err := checkTags(in.Tags, in.ResourceARN); err != nil {
		return nil, err
	}
	err = r.update(ctx, sc, func(s *state) error {
		id, err := resourceOf(s, sc, in.ResourceARN)
		if err != nil {
			return err
		}
		tags, err := mergeTags(s.Tags[id], in.Tags)
		if err != nil {
			return err
		}
		if len(tags) > maxTags {
			return tooManyTags(len(tags), in.ResourceARN)
		}
		if err := s.roomForTags(id, tags, codeTooManyTags); err != nil {
			return err
		}
		s.setTags(id, tags)
		return nil
	})
	return struct{}{}, err
}

func (r *Registry) untagResource(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, err := decodeTags(body)
	if err != nil {
		return nil, err
	}
	if in.TagKeys == nil || len(in.TagKeys) > maxTagList {
		return nil, invalid("TagKeys is required: 0 to %d keys", maxTagList)
	}
	for _, k := range in.TagKeys {
		if k == "" || len(k) > 128 {
			return nil, invalid("tag key %s must be 1 to 128 characters", quote(k))
		}
	}
	err = r.update(ctx, sc, func(s *state) error {
		id, err := resourceOf(s, sc, in.ResourceARN)
		if err != nil {
			return err
		}
		var kept []tagJSON
		for _, t := range s.Tags[id] {
			if !contains(in.TagKeys, t.Key) {
				kept = append(kept, t)
			}
		}
		if len(kept) != len(s.Tags[id]) {
			s.setTags(id, kept)
		}
		return nil
	})
	return struct{}{}, err
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// maxServiceAttributes is the model's ServiceAttributesMap bound.
const maxServiceAttributes = 30

func (r *Registry) getServiceAttributes(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in struct{ ServiceId string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkRequired("ServiceId", in.ServiceId, 255); err != nil {
		return nil, err
	}
	var out struct {
		ServiceAttributes struct {
			Attributes    map[string]string `json:",omitempty"`
			ResourceOwner string
			ServiceArn    string
		}
	}
	err := r.view(ctx, sc, func(s *state) error {
		sv, err := findService(s, in.ServiceId)
		if err != nil {
			return err
		}
		a := &out.ServiceAttributes
		a.Attributes, a.ResourceOwner, a.ServiceArn = maps.Clone(sv.Attrs), sc.Account, arn(sc, "service", sv.ID)
		return nil
	})
	return out, err
}

func (r *Registry) updateServiceAttributes(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in struct {
		ServiceId  string
		Attributes map[string]string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkRequired("ServiceId", in.ServiceId, 255); err != nil {
		return nil, err
	}
	if len(in.Attributes) == 0 || len(in.Attributes) > maxServiceAttributes {
		return nil, invalid("Attributes must hold 1 to %d attributes", maxServiceAttributes)
	}
	for k, v := range in.Attributes {
		if len(k) > maxAttrKeyLen || len(v) > maxAttrValueLen {
			return nil, invalid("service attribute %s: keys are at most %d characters, values at most %d", quote(k), maxAttrKeyLen, maxAttrValueLen)
		}
	}
	return struct{}{}, r.changeServiceAttributes(ctx, sc, in.ServiceId, func(attrs map[string]string) {
		maps.Copy(attrs, in.Attributes)
	})
}

func (r *Registry) deleteServiceAttributes(ctx context.Context, sc Scope, body []byte) (any, error) {
	var in struct {
		ServiceId  string
		Attributes []string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkRequired("ServiceId", in.ServiceId, 255); err != nil {
		return nil, err
	}
	if len(in.Attributes) == 0 || len(in.Attributes) > maxServiceAttributes {
		return nil, invalid("Attributes must hold 1 to %d keys", maxServiceAttributes)
	}
	for _, k := range in.Attributes {
		if len(k) > maxAttrKeyLen {
			return nil, invalid("service attribute key %s is longer than %d characters", quote(k), maxAttrKeyLen)
		}
	}
	return struct{}{}, r.changeServiceAttributes(ctx, sc, in.ServiceId, func(attrs map[string]string) {
		for _, k := range in.Attributes {
			delete(attrs, k)
		}
	})
}

// changeServiceAttributes applies change to a copy of a service's
// attributes; more than 30 is ServiceAttributesLimitExceededException.
func (r *Registry) changeServiceAttributes(ctx context.Context, sc Scope, id string, change func(map[string]string)) error {
	return r.update(ctx, sc, func(s *state) error {
		sv, err := findService(s, id)
		if err != nil {
			return err
		}
		attrs := maps.Clone(sv.Attrs)
		if attrs == nil {
			attrs = map[string]string{}
		}
		change(attrs)
		if maps.Equal(attrs, sv.Attrs) || len(attrs) == 0 && len(sv.Attrs) == 0 {
			return nil
		}
		if len(attrs) > maxServiceAttributes {
			return &apiError{Code: codeAttributesLimit, Message: "a service may have at most " + strconv.Itoa(maxServiceAttributes) + " attributes"}
		}
		old := svcBytes(sv)
		c := *sv
		c.Attrs = attrs
		if len(attrs) == 0 {
			c.Attrs = nil
		}
		if err := s.changedService(&c, old, codeAttributesLimit); err != nil {
			return err
		}
		s.Services[sv.ID] = &c
		return nil
	})
}
