package traffic

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
)

// Sticky makes a service's split sticky per client: the request's
// client key (one of a header, a cookie or the client's address) picks
// the revision by autoscale.Split.PickKey, so a client stays on one
// revision while the split stays, and a changed split moves only the
// clients whose point a range boundary crosses. A request without its
// key (the header or cookie absent or empty) is split per request; a
// tagged request goes to its tag's revision either way. The zero value
// splits per request.
type Sticky struct {
	// Header names a request header whose value is the client key.
	Header string `json:"header,omitempty"`
	// Cookie names a cookie whose value is the client key.
	Cookie string `json:"cookie,omitempty"`
	// ClientAddress keys on the IP address of the connection the
	// request came on (the address tollgate's listener saw, not
	// X-Forwarded-For).
	ClientAddress bool `json:"client_address,omitempty"`
}

// httpToken is an HTTP token (RFC 9110 §5.6.2): a header's or a cookie's
// name.
var httpToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Check reports a Sticky with more than one key or a name that is not an
// HTTP token; the error wraps ErrInvalidSpec.
func (s Sticky) Check(service string) error {
	n := 0
	for _, name := range []string{s.Header, s.Cookie} {
		if name != "" {
			n++
			if !httpToken.MatchString(name) {
				return fmt.Errorf("%w: service %s: sticky: %q is not a header or cookie name", ErrInvalidSpec, service, name)
			}
		}
	}
	if s.ClientAddress {
		n++
	}
	if n > 1 {
		return fmt.Errorf("%w: service %s: sticky: give one client key (header, cookie or client address), not %d", ErrInvalidSpec, service, n)
	}
	return nil
}

// Key is r's client key under s, or false when r has none (then it is
// split per request).
func (s *Sticky) Key(r *http.Request) (string, bool) {
	switch {
	case s.Header != "":
		k := r.Header.Get(s.Header)
		return k, k != ""
	case s.Cookie != "":
		c, err := r.Cookie(s.Cookie)
		if err != nil || c.Value == "" {
			return "", false
		}
		return c.Value, true
	case s.ClientAddress:
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		return host, host != ""
	}
	return "", false
}
