package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/url"

	"github.com/tollgate/tollgate/quota"
)

// poolRoute is one service's route to its autoscaled pool.
type poolRoute struct {
	route   *quota.Route
	service string
	handler http.Handler
}

// setPools fills a policy's pool upstreams and routes from its config.
func (g *Gateway) setPools(p *policy, cfg *quota.Config) {
	if g.pools == nil {
		return
	}
	p.pools = map[string]http.Handler{}
	for _, s := range cfg.Services() {
		if s.Autoscaled {
			p.pools[s.Name] = g.pools(s.Name)
		}
	}
	for _, s := range cfg.Routed() {
		p.routes = append(p.routes, poolRoute{route: s.Route, service: s.Name, handler: p.pools[s.Name]})
	}
}

// matchRoute returns the pool handler of the first route r takes, with the
// request as the instance should see it, or nil.
func (p *policy) matchRoute(r *http.Request) (http.Handler, *http.Request) {
	for _, pr := range p.routes {
		path, ok := pr.route.Match(r.Host, r.URL.Path)
		if !ok || pr.handler == nil {
			continue
		}
		if path != r.URL.Path {
			r2 := new(http.Request)
			*r2 = *r
			u := new(url.URL)
			*u = *r.URL
			u.Path, u.RawPath = path, ""
			r2.URL = u
			r = r2
		}
		return pr.handler, r
	}
	return nil, r
}

// servePool hands an allowed AWS JSON request to the service's pool; the
// body, already read, is replayed from its own copy.
func servePool(h http.Handler, w http.ResponseWriter, r *http.Request, body []byte) {
	body = bytes.Clone(body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	h.ServeHTTP(w, r)
}
