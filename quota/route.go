package quota

import (
	"slices"
	"strings"
)

// Route says which HTTP requests go straight to a service's autoscaled
// pool, without throttling: those whose Host is Host (when set) and whose
// path is under PathPrefix (when set). At least one is set.
type Route struct {
	// PathPrefix is a path such as "/hello/": it matches "/hello" and
	// everything under "/hello/", not "/helloworld".
	PathPrefix string
	// StripPrefix removes PathPrefix (without its trailing slash) from
	// the path the instance sees: "/hello/x" arrives as "/x".
	StripPrefix bool
	// Host matches the request's Host header without its port, case
	// insensitively, and a tagged one, TAG---Host, as Cloud Run's tagged
	// URLs (the pool sends it to the revision with that tag).
	Host string
}

// Match reports whether a request for host and path takes the route, and
// the path the instance sees.
func (r *Route) Match(host, path string) (string, bool) {
	if r.Host != "" {
		h := host
		if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
			h = h[:i]
		}
		if i := strings.Index(h, "---"); i > 0 && !strings.EqualFold(h, r.Host) {
			h = h[i+len("---"):] // a revision's tag
		}
		if !strings.EqualFold(h, r.Host) {
			return "", false
		}
	}
	prefix := strings.TrimSuffix(r.PathPrefix, "/")
	if prefix == "" {
		return path, true
	}
	if path != prefix && !strings.HasPrefix(path, prefix+"/") {
		return "", false
	}
	if !r.StripPrefix {
		return path, true
	}
	rest := strings.TrimPrefix(path, prefix)
	if rest == "" {
		rest = "/"
	}
	return rest, true
}

// Routed returns the services that have a route, most specific first: a
// route with a host before one without, then longer path prefixes first.
func (c *Config) Routed() []*Service {
	var out []*Service
	for _, s := range c.services {
		if s.Route != nil {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b *Service) int {
		if (a.Route.Host != "") != (b.Route.Host != "") {
			if a.Route.Host != "" {
				return -1
			}
			return 1
		}
		return len(b.Route.PathPrefix) - len(a.Route.PathPrefix)
	})
	return out
}
