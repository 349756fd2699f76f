package config

// This file reads an autoscale section's sticky block: which part of a
// request identifies a client, so that the traffic split sends each
// client to one revision rather than each request by the round robin.

import (
	"net/textproto"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// Sticky makes a service's traffic split sticky per client: a request's
// client key (one of a header, a cookie or the client's address) hashes
// to a point in [0, 100) that falls in one revision's range of percents,
// so a client stays on its revision while the split stays, and a
// rollout moves only the clients whose point a boundary crosses. A
// request without the header or cookie is split per request.
type Sticky struct {
	// Header names a request header whose value is the key, such as
	// X-User-Id (header); canonical form.
	Header string
	// Cookie names a cookie whose value is the key (cookie).
	Cookie string
	// ClientAddress keys on the IP address tollgate's listener saw the
	// request come from (client_address: true); X-Forwarded-For is not
	// trusted.
	ClientAddress bool
}

// tokenPattern is an HTTP token (RFC 9110 §5.6.2): what a header or a
// cookie name is made of.
var tokenPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// sticky reads a sticky block: exactly one of header, cookie or
// client_address: true.
func (p *parser) sticky(n *yaml.Node, path string) (*Sticky, bool) {
	s := &Sticky{}
	good, before := true, len(p.w.Errs)
	given := 0
	token := func(dst *string, what string) func(k, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			given++
			x, g := p.str(v, f)
			if g && !tokenPattern.MatchString(x) {
				p.errorf(v, f, "%q is not a %s name: letters, digits and !#$%%&'*+-.^_`|~ only", x, what)
				g = false
			}
			good = good && g
			*dst = x
		}
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "want {header: NAME}, {cookie: NAME} or {client_address: true}, got %s", kindName(n))
		return nil, false
	}
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"header": token(&s.Header, "header"),
		"cookie": token(&s.Cookie, "cookie"),
		"client_address": func(_, v *yaml.Node, f string) {
			given++
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&s.ClientAddress) != nil {
				p.errorf(v, f, "want true or false, got %s", kindName(v))
				good = false
				return
			}
			if !s.ClientAddress {
				p.errorf(v, f, "false keys on nothing: give true, or leave sticky out for a split per request")
				good = false
			}
		},
	})
	if !good || len(p.w.Errs) > before { // an unknown or repeated field too
		return nil, false
	}
	if given != 1 {
		p.errorf(n, path, "give exactly one client key: header: NAME, cookie: NAME or client_address: true (%d given)", given)
		return nil, false
	}
	s.Header = textproto.CanonicalMIMEHeaderKey(s.Header)
	return s, true
}

// text says what a sticky block keys on, for the table.
func (s *Sticky) text() string {
	switch {
	case s == nil:
		return "per request"
	case s.Header != "":
		return "sticky per client by header " + s.Header
	case s.Cookie != "":
		return "sticky per client by cookie " + s.Cookie
	default:
		return "sticky per client by client address"
	}
}
