package config

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/quota"
)

// route parses a service's route section.
func (p *parser) route(n *yaml.Node, path string) (*quota.Route, bool) {
	r := &quota.Route{}
	ok := true
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"path_prefix": func(_, v *yaml.Node, f string) {
			s, good := p.str(v, f)
			if !good {
				ok = false
				return
			}
			trimmed := strings.TrimSuffix(s, "/")
			switch {
			case !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "?#% \t") || strings.Contains(s, "//"):
				p.errorf(v, f, "%q is not a path such as /hello/", s)
				ok = false
			case slices.ContainsFunc(reservedPaths, func(r string) bool {
				return trimmed == r || strings.HasPrefix(trimmed, r+"/") || (trimmed != "" && strings.HasPrefix(r, trimmed+"/"))
			}):
				p.errorf(v, f, "%q overlaps tollgate's own endpoints (%s)", s, strings.Join(reservedPaths, ", "))
				ok = false
			default:
				r.PathPrefix = s
			}
		},
		"strip_prefix": func(_, v *yaml.Node, f string) {
			var b bool
			if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
				p.errorf(v, f, "want true or false, got %s", kindName(v))
				ok = false
				return
			}
			r.StripPrefix = b
		},
		"host": func(_, v *yaml.Node, f string) {
			s, good := p.str(v, f)
			if good && !hostName.MatchString(s) {
				p.errorf(v, f, "%q is not a host name such as hello.example.com (no port)", s)
				good = false
			}
			if !good {
				ok = false
				return
			}
			r.Host = strings.ToLower(s)
		},
	})
	if n.Kind != yaml.MappingNode || !ok {
		return nil, false
	}
	if strings.TrimSuffix(r.PathPrefix, "/") == "" && r.Host == "" {
		p.errorf(n, path, "give a path_prefix other than / or a host: a route for every request would shadow the AWS endpoint")
		return nil, false
	}
	return r, true
}
