package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// CloudMap names where an autoscaled service's instances are listed in
// tollgate's local AWS Cloud Map registry (package cloudmap): each is
// registered once ready and deregistered when it stops taking requests.
type CloudMap struct {
	// Namespace and Service are the names a client passes to
	// DiscoverInstances; both are created (HTTP) when missing.
	Namespace, Service string
	// Account and Region are the registry's scope; empty means the
	// registry's default scope (cloudmap.DefaultScope). A client sees the
	// instances when the gateway maps its access key to Account (see
	// access_keys) and it signs for Region.
	Account, Region string
	// Attributes are added to every instance's, beside the
	// AWS_INSTANCE_IPV4 and AWS_INSTANCE_PORT tollgate sets.
	Attributes map[string]string
}

// Cloud Map's limits on names and attributes (AWS API reference).
var (
	cmServiceLabel = `[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?`
	cmServiceName  = regexp.MustCompile(`^` + cmServiceLabel + `(\.` + cmServiceLabel + `)*$`)
	cmPrintable    = regexp.MustCompile(`^[!-~]+$`)
	cmRegion       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9-]{1,64}$`) }) // on first use: 700 allocations
)

func (p *parser) cloudMap(n *yaml.Node, path string) (*CloudMap, bool) {
	c := &CloudMap{}
	ok := true
	var nsNode, svcNode *yaml.Node
	text := func(dst *string, node **yaml.Node, check func(string) string) func(k, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			if node != nil {
				*node = v
			}
			s, good := p.str(v, f)
			if good {
				if msg := check(s); msg != "" {
					p.errorf(v, f, "%q %s", s, msg)
					good = false
				}
			}
			ok = ok && good
			*dst = s
		}
	}
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"namespace": text(&c.Namespace, &nsNode, func(s string) string {
			if len(s) > 1024 || !cmPrintable.MatchString(s) {
				return "is not 1 to 1024 printable characters without spaces"
			}
			return ""
		}),
		"service": text(&c.Service, &svcNode, func(s string) string {
			if len(s) > 127 || !cmServiceName.MatchString(s) {
				return "is not a Cloud Map service name: up to 127 characters of letters, digits, '-' and '_' in dot-separated labels"
			}
			return ""
		}),
		"account": text(&c.Account, nil, func(s string) string {
			if len(s) > 128 || !cmPrintable.MatchString(s) {
				return "is not an account id"
			}
			return ""
		}),
		"region": text(&c.Region, nil, func(s string) string {
			if !cmRegion().MatchString(s) {
				return "is not a region such as us-east-1"
			}
			return ""
		}),
		"attributes": func(_, v *yaml.Node, f string) {
			if v.Kind != yaml.MappingNode {
				p.errorf(v, f, "want a mapping of key: value, got %s", kindName(v))
				ok = false
				return
			}
			c.Attributes = map[string]string{}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, val := v.Content[i], v.Content[i+1]
				kf := joinField(f, k.Value)
				s, good := p.str(val, kf)
				switch {
				case !good:
				case len(k.Value) > 255 || !cmPrintable.MatchString(k.Value):
					p.errorf(k, kf, "is not an attribute key: 1 to 255 printable characters without spaces")
					good = false
				case strings.HasPrefix(k.Value, "AWS_"):
					p.errorf(k, kf, "AWS_ attributes are Cloud Map's; tollgate sets AWS_INSTANCE_IPV4 and AWS_INSTANCE_PORT")
					good = false
				case s == "" || len(s) > 1024:
					p.errorf(val, kf, "want 1 to 1024 characters")
					good = false
				}
				ok = ok && good
				c.Attributes[k.Value] = s
			}
			if len(c.Attributes) > 30 {
				p.errorf(v, f, "%d attributes; Cloud Map allows 30 per instance", len(c.Attributes))
				ok = false
			}
		},
	})
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	if nsNode == nil {
		p.errorf(n, joinField(path, "namespace"), "missing: the namespace name clients discover in")
		ok = false
	}
	if svcNode == nil {
		p.errorf(n, joinField(path, "service"), "missing: the service name clients discover")
		ok = false
	}
	return c, ok
}

// template is the registration in a stable text form, for
// Autoscale.Template: a change makes a new revision, whose instances are
// registered under the new names.
func (c *CloudMap) template() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, " cloud_map %q/%q in %q/%q", c.Namespace, c.Service, c.Account, c.Region)
	for _, k := range slices.Sorted(maps.Keys(c.Attributes)) {
		fmt.Fprintf(&b, " %q=%q", k, c.Attributes[k])
	}
	return b.String()
}
