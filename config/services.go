package config

// This file parses the throttling policy's sections: each service (with
// its autoscale section), category and override.

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/internal/suggest"
	"github.com/tollgate/tollgate/quota"
	"go.yaml.in/yaml/v3"
)

func (p *parser) service(n *yaml.Node, path string) (*quota.Service, *Autoscale) {
	var (
		preset, name, prefix, signing, upstream string
		defaultCategory                         string
		defaultNode                             *yaml.Node
		throttle                                quota.Throttle
		hasThrottle                             bool
		route                                   *quota.Route
		scale                                   *Autoscale
		upstreamNode, routeNode, scaleNode      *yaml.Node
		categories                              []*quota.Category
		catNodes                                []*yaml.Node
		nameNode, categoriesNode                *yaml.Node
		ok                                      = true
	)
	set := map[string]bool{}
	fail := func() { ok = false }
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"preset": func(_, v *yaml.Node, f string) {
			s, good := p.str(v, f)
			if !good {
				fail()
				return
			}
			if !slices.Contains(quota.PresetNames(), s) {
				p.errorf(v, f, "%v %q%s (have %s)", quota.ErrUnknownPreset, s, suggest.DidYouMean(s, quota.PresetNames()), strings.Join(quota.PresetNames(), ", "))
				fail()
				return
			}
			preset = s
		},
		"name": func(_, v *yaml.Node, f string) {
			nameNode = v
			set["name"] = true
			if s, good := p.name(v, f, namePattern, "service name"); good {
				name = s
			} else {
				fail()
			}
		},
		"target_prefix": func(_, v *yaml.Node, f string) {
			set["target_prefix"] = true
			if s, good := p.name(v, f, actionPattern, "target prefix"); good {
				prefix = s
			} else {
				fail()
			}
		},
		"signing_name": func(_, v *yaml.Node, f string) {
			set["signing_name"] = true
			if s, good := p.name(v, f, namePattern, "signing name"); good {
				signing = s
			} else {
				fail()
			}
		},
		"route": func(_, v *yaml.Node, f string) {
			routeNode = v
			r, good := p.route(v, f)
			if !good {
				fail()
			}
			route = r
		},
		"autoscale": func(_, v *yaml.Node, f string) {
			scaleNode = v
			a, good := p.autoscale(v, f)
			if !good {
				fail()
			}
			scale = a
		},
		"upstream": func(_, v *yaml.Node, f string) {
			upstreamNode = v
			s, good := p.str(v, f)
			if !good {
				fail()
				return
			}
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.errorf(v, f, "%q is not an http:// or https:// URL", s)
				fail()
				return
			}
			upstream = s
		},
		"default_category": func(_, v *yaml.Node, f string) {
			defaultNode = v
			if c, good := p.name(v, f, namePattern, "category name"); good {
				defaultCategory = c
			} else {
				fail()
			}
		},
		"throttle": func(_, v *yaml.Node, f string) {
			set["throttle"] = true
			hasThrottle = true
			throttle = quota.Throttle{Message: "Rate exceeded", HTTPStatus: 400}
			p.fields(v, f, map[string]func(k, v *yaml.Node, f string){
				"code": func(_, v *yaml.Node, f string) {
					if s, good := p.name(v, f, actionPattern, "error code"); good {
						throttle.Code = s
					} else {
						fail()
					}
				},
				"message": func(_, v *yaml.Node, f string) {
					if s, good := p.str(v, f); good {
						throttle.Message = s
					} else {
						fail()
					}
				},
				"status": func(_, v *yaml.Node, f string) {
					st, good := p.integer(v, f)
					if good && (st < 400 || st > 499) && st != 503 {
						p.errorf(v, f, "status %d must be a 4xx, or 503 (as EC2 answers RequestLimitExceeded)", st)
						good = false
					}
					if !good {
						fail()
						return
					}
					throttle.HTTPStatus = int(st)
				},
			})
			if throttle.Code == "" {
				p.errorf(v, joinField(f, "code"), "missing")
				fail()
			}
		},
		"categories": func(_, v *yaml.Node, f string) {
			set["categories"] = true
			categoriesNode = v
			for i, cn := range p.list(v, f) {
				c := p.category(cn, fmt.Sprintf("%s[%d]", f, i))
				if c == nil {
					fail()
					continue
				}
				categories = append(categories, c)
				catNodes = append(catNodes, cn)
			}
		},
	})
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	if upstreamNode != nil && scaleNode != nil {
		p.errorf(upstreamNode, joinField(path, "upstream"), "a service has an upstream or an autoscale pool, not both")
		ok = false
	}
	if routeNode != nil && scaleNode == nil {
		p.errorf(routeNode, joinField(path, "route"), "a route leads to the service's autoscale pool: add an autoscale section")
		ok = false
	}
	if preset != "" {
		for _, field := range []string{"name", "target_prefix", "signing_name", "throttle", "categories"} {
			if set[field] {
				p.errorf(n, joinField(path, field), "cannot be changed on preset %q (only upstream, route and autoscale can)", preset)
				ok = false
			}
		}
		if !ok {
			return nil, nil
		}
		s, _ := quota.Preset(preset) // known: checked above
		if scale != nil && !p.checkTrafficNames(scale, s.Name) {
			return nil, nil
		}
		if !p.defaultCategory(s, defaultNode, path, defaultCategory) {
			return nil, nil
		}
		s.Upstream, s.Route, s.Autoscaled = upstream, route, scale != nil
		return s, scale
	}
	if nameNode == nil && ok {
		p.errorf(n, joinField(path, "name"), "missing: give a name or a preset")
		ok = false
	}
	if categoriesNode == nil && scaleNode == nil && ok {
		p.errorf(n, joinField(path, "categories"), "missing: a service needs at least one category, or an autoscale pool and a route")
		ok = false
	}
	if !hasThrottle {
		throttle = quota.Throttle{Code: "ThrottlingException", Message: "Rate exceeded", HTTPStatus: 400}
	}
	// An action in two categories, or a category name used twice.
	cats := map[string]bool{}
	actions := map[string]string{}
	for i, c := range categories {
		cf := fmt.Sprintf("%s.categories[%d]", path, i)
		if cats[c.Name] {
			p.errorf(catNodes[i], cf+".name", "category %q defined twice in service %s", c.Name, name)
			ok = false
		}
		cats[c.Name] = true
		for _, a := range c.Actions {
			if prev, dup := actions[a]; dup {
				p.errorf(catNodes[i], cf+".actions", "action %s is already in category %q of service %s", a, prev, name)
				ok = false
				continue
			}
			actions[a] = c.Name
		}
	}
	if ok && scale != nil {
		ok = p.checkTrafficNames(scale, name)
	}
	if !ok {
		return nil, nil
	}
	s, err := quota.NewService(name, categories)
	if err != nil {
		p.errorf(n, path, "%v", err)
		return nil, nil
	}
	if !p.defaultCategory(s, defaultNode, path, defaultCategory) {
		return nil, nil
	}
	s.TargetPrefix, s.SigningName, s.Throttle, s.Upstream = prefix, signing, throttle, upstream
	s.Route, s.Autoscaled = route, scale != nil
	if s.SigningName == "" {
		s.SigningName = name
	}
	return s, scale
}

// defaultCategory sets s's DefaultCategory from the service's
// default_category field (at node v, when given): a category of s, or
// "none" for none.
func (p *parser) defaultCategory(s *quota.Service, v *yaml.Node, path, name string) bool {
	if v == nil {
		return true
	}
	if name == "none" {
		s.DefaultCategory = ""
		return true
	}
	var names []string
	for _, c := range s.Categories {
		names = append(names, c.Name)
	}
	if !slices.Contains(names, name) {
		p.errorf(v, joinField(path, "default_category"), "%v %q of service %s%s (or none)", quota.ErrUnknownCategory, name, s.Name, suggest.DidYouMean(name, names))
		return false
	}
	s.DefaultCategory = name
	return true
}

func (p *parser) category(n *yaml.Node, path string) *quota.Category {
	var (
		c     quota.Category
		lf    limitFields
		ok    = true
		named bool
		acts  *yaml.Node
	)
	handlers := map[string]func(k, v *yaml.Node, f string){
		"name": func(_, v *yaml.Node, f string) {
			named = true
			if s, good := p.name(v, f, namePattern, "category name"); good {
				c.Name = s
			} else {
				ok = false
			}
		},
		"actions": func(_, v *yaml.Node, f string) {
			acts = v
			items := p.list(v, f)
			if v.Kind == yaml.SequenceNode && len(items) == 0 {
				p.errorf(v, f, "a category needs at least one action")
				ok = false
			}
			seen := map[string]bool{}
			for i, an := range items {
				a, good := p.name(an, fmt.Sprintf("%s[%d]", f, i), actionPattern, "action name")
				if !good {
					ok = false
					continue
				}
				if seen[a] {
					p.errorf(an, fmt.Sprintf("%s[%d]", f, i), "action %s listed twice", a)
					ok = false
					continue
				}
				seen[a] = true
				c.Actions = append(c.Actions, a)
			}
		},
	}
	p.limitHandlers(&lf, handlers)
	p.fields(n, path, handlers)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if !named {
		p.errorf(n, joinField(path, "name"), "missing")
		ok = false
	}
	if acts == nil {
		p.errorf(n, joinField(path, "actions"), "missing")
		ok = false
	}
	l, good := p.limit(n, path, &lf)
	if !ok || !good {
		return nil
	}
	c.Limit = l
	return &c
}

// override reads one entry of overrides; ok reports whether its service,
// account, region and category parsed (a bad limit is reported, not
// returned: the entry is still checked against the services).
func (p *parser) override(n *yaml.Node, path string) (o quota.Override, ok bool) {
	var lf limitFields
	ok = true
	required := map[string]bool{}
	text := func(dst *string, re *regexp.Regexp, what string) func(k, v *yaml.Node, f string) {
		return func(k, v *yaml.Node, f string) {
			required[k.Value] = true
			if s, good := p.name(v, f, re, what); good {
				*dst = s
			} else {
				ok = false
			}
		}
	}
	handlers := map[string]func(k, v *yaml.Node, f string){
		"service":  text(&o.Service, namePattern, "service name"),
		"account":  text(&o.Account, accountChars(), "account id"),
		"region":   text(&o.Region, namePattern, "region"),
		"category": text(&o.Category, namePattern, "category name"),
	}
	p.limitHandlers(&lf, handlers)
	p.fields(n, path, handlers)
	if n.Kind != yaml.MappingNode {
		return o, false
	}
	for _, f := range []string{"service", "account", "category"} {
		if !required[f] {
			p.errorf(n, joinField(path, f), "missing")
			ok = false
		}
	}
	// A bad limit is an error of its own, already recorded; the entry's
	// names are still checked against the services (ok), so one run
	// reports a typo of the category beside a bad capacity.
	o.Limit, _ = p.limit(n, path, &lf)
	return o, ok
}
