package forward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/tollgate/tollgate/internal/proxybuf"
)

// The forwarder is the proxy's fast path for the common request: one
// without a body that may be sent again (GET, HEAD, OPTIONS, TRACE, or
// one with an Idempotency-Key), not an upgrade. It speaks HTTP/1.1 to
// the instance over kept-alive connections in the request's own
// goroutine: the request head goes out in one write, the response is read
// with net/http's own parser (http.ReadResponse), and its head and a
// known-length body reach the client in one write when the handler
// returns. Only a stream is flushed as it comes: a body of unknown length,
// Server-Sent Events, or a response that asks for it with
// X-Accel-Buffering: no. Every other request (a body, an upgrade such as
// a websocket, CONNECT) goes through httputil.ReverseProxy; both send the
// instance the same request and the client the same answer.

// maxInformational bounds the 1xx responses forwarded before the final
// one.
const maxInformational = 32

// FastPath reports whether the forwarder takes r: no body, replayable as
// http.Transport defines it (so a connection the instance had closed
// while idle can be retried on a new one), no upgrade, an origin-form
// path, and a Host it sends as it is.
func FastPath(r *http.Request) bool {
	if r.ContentLength != 0 || r.URL.Opaque != "" || !strings.HasPrefix(r.URL.Path, "/") {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
	case http.MethodConnect:
		return false
	default:
		if _, ok := r.Header["Idempotency-Key"]; !ok {
			if _, ok := r.Header["X-Idempotency-Key"]; !ok {
				return false
			}
		}
	}
	if _, ok := r.Header["Upgrade"]; ok {
		return false
	}
	return plainHost(r.Host)
}

// plainHost reports whether h is a Host header sent as it is: ASCII (no
// punycode to apply), no IPv6 zone, valid.
func plainHost(h string) bool {
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 || h[i] == '%' {
			return false
		}
	}
	return httpguts.ValidHostHeader(h)
}

// forward sends r to the instance at host and relays its answer to w.
// An error is returned only while nothing has been written to w; a failure
// after the answer began aborts the client's connection
// (http.ErrAbortHandler) under an HTTP server, so a cut answer never
// looks complete.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, host string) error {
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		c, reused, err := p.conns.get(ctx, host, time.Now())
		if err != nil {
			return ctxErr(ctx, err)
		}
		stop := context.AfterFunc(ctx, c.interrupt)
		resp, err := roundTrip(c, w, r, host)
		if err != nil {
			stop()
			c.nc.Close()
			if ce := ctx.Err(); ce != nil {
				return ce
			}
			var st staleConnError
			if reused && attempt == 0 && errors.As(err, &st) {
				// The instance closed this idle connection (a restart, its
				// keep-alive timeout) or wrote on it while it idled, before
				// it answered the request: the others are likely the same;
				// a new one takes the request (replayable: FastPath).
				p.conns.drop(host)
				continue
			}
			return err
		}
		defer stop() // relay may abort the handler (http.ErrAbortHandler)
		reusable := p.relay(w, r, resp, c)
		// Bytes past the answer (a body on a HEAD answer, say) would be
		// read as the next request's answer.
		reusable = reusable && c.br.Buffered() == 0
		if stop() && reusable {
			p.conns.put(host, c, time.Now())
		} else {
			c.nc.Close()
		}
		return nil
	}
}

// ctxErr is err, or the context's error once it ended (the dial was cut
// by the request timeout or the client leaving).
func ctxErr(ctx context.Context, err error) error {
	if ce := ctx.Err(); ce != nil {
		return ce
	}
	return err
}

// staleConnError is a failure before the instance's answer began: the
// connection was closed, or what came first was no response head.
type staleConnError struct{ err error }

func (e staleConnError) Error() string { return e.err.Error() }
func (e staleConnError) Unwrap() error { return e.err }

// isTimeout reports whether err is a deadline's: the request's context
// ended (forward reports that instead).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// closedByPeer reports whether err says the other side closed the
// connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// roundTrip writes r's head on c and reads the final response's head,
// relaying informational (1xx) responses to w on the way.
func roundTrip(c *upConn, w http.ResponseWriter, r *http.Request, host string) (*http.Response, error) {
	if err := writeHead(c.bw, r, host); err != nil {
		c.bw.Reset(c.nc)
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		if closedByPeer(err) {
			return nil, staleConnError{err}
		}
		return nil, err
	}
	if _, err := c.br.Peek(1); err != nil {
		if closedByPeer(err) {
			return nil, staleConnError{err}
		}
		return nil, err
	}
	for n := 0; ; n++ {
		c.budget.left = maxResponseHeadBytes
		resp, err := http.ReadResponse(c.br, r)
		if err != nil {
			err = fmt.Errorf("reading the instance's response: %w", err)
			if n == 0 && !errors.Is(err, errResponseHeadTooLarge) && !isTimeout(err) {
				return nil, staleConnError{err}
			}
			return nil, err
		}
		code := resp.StatusCode
		if code < 100 || code > 999 {
			// net/http would panic writing it.
			return nil, fmt.Errorf("the instance answered with status %d", code)
		}
		if code == http.StatusSwitchingProtocols {
			return nil, errors.New("the instance switched protocols (101) on a request that asked for no upgrade")
		}
		if code >= 100 && code < 200 {
			if n >= maxInformational {
				return nil, fmt.Errorf("the instance sent more than %d informational (1xx) responses", maxInformational)
			}
			h := w.Header()
			for k, vv := range resp.Header {
				h[k] = append(h[k], vv...)
			}
			w.WriteHeader(code)
			clear(h) // WriteHeader keeps them for a 1xx
			continue
		}
		c.budget.left = 1<<63 - 1
		return resp, nil
	}
}

// relay writes resp to w: its head without hop-by-hop headers, the body
// (flushed as it comes for a stream) and its trailers. It reports whether
// c may take another request: the body was read to its end and the
// instance keeps the connection.
func (p *Proxy) relay(w http.ResponseWriter, r *http.Request, resp *http.Response, c *upConn) bool {
	removeHopByHop(resp.Header)
	h := w.Header()
	for k, vv := range resp.Header {
		if old, ok := h[k]; ok {
			h[k] = append(old, vv...)
		} else {
			h[k] = vv
		}
	}
	if len(resp.Trailer) > 0 {
		keys := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	announced := len(resp.Trailer)
	w.WriteHeader(resp.StatusCode)

	if resp.Body != http.NoBody {
		var rerr, werr error
		if n := resp.ContentLength; n > 0 && int64(c.br.Buffered()) >= n {
			// A body of known length read with the head (a small
			// answer) is written from the connection's buffer.
			b, _ := c.br.Peek(int(n))
			_, werr = w.Write(b)
			c.br.Discard(int(n))
			if werr == nil && streams(resp) {
				if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
					werr = err
				}
			}
		} else {
			rerr, werr = copyBody(w, resp.Body, streams(resp))
		}
		if rerr != nil || werr != nil {
			if werr == nil && r.Context().Err() == nil {
				p.log.Info("proxy: the instance's answer ended early", "method", r.Method, "path", r.URL.Path, "error", rerr)
			}
			// The answer began: abort it, as httputil.ReverseProxy does,
			// so the client sees a cut connection, not a complete answer.
			c.nc.Close()
			if r.Context().Value(http.ServerContextKey) != nil {
				panic(http.ErrAbortHandler)
			}
			return false
		}
	}
	if len(resp.Trailer) > 0 {
		// Trailers need a chunked answer, even for a short body that
		// net/http would otherwise send with a Content-Length.
		_ = http.NewResponseController(w).Flush()
		if len(resp.Trailer) == announced {
			for k, vv := range resp.Trailer {
				h[k] = append(h[k], vv...)
			}
		} else {
			for k, vv := range resp.Trailer {
				k = http.TrailerPrefix + k
				h[k] = append(h[k], vv...)
			}
		}
	}
	return !resp.Close
}

// streams reports whether resp's body is flushed to the client as it
// comes: its length is unknown, it is Server-Sent Events, or the instance
// asks for it (X-Accel-Buffering: no, nginx's header for the same).
func streams(resp *http.Response) bool {
	if resp.ContentLength < 0 {
		return true
	}
	if ct := resp.Header["Content-Type"]; len(ct) > 0 {
		base, _, _ := strings.Cut(ct[0], ";")
		if strings.EqualFold(textproto.TrimString(base), "text/event-stream") {
			return true
		}
	}
	if xa := resp.Header["X-Accel-Buffering"]; len(xa) > 0 && strings.EqualFold(textproto.TrimString(xa[0]), "no") {
		return true
	}
	return false
}

// copyBody copies body to w, flushing after each write when flush is
// set; rerr is a read error (io.EOF is none), werr a write error.
func copyBody(w http.ResponseWriter, body io.Reader, flush bool) (rerr, werr error) {
	buf := proxybuf.Buffers.Get()
	defer proxybuf.Buffers.Put(buf)
	var rc *http.ResponseController
	if flush {
		rc = http.NewResponseController(w)
	}
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil, werr
			}
			if flush {
				if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
					return nil, ferr
				}
			}
		}
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
	}
}

// removeHopByHop removes h's hop-by-hop headers (RFC 9110 §7.6.1, and
// those httputil.ReverseProxy drops) and those its Connection header
// names.
func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	// An answer has a few headers: one pass over them is cheaper than a
	// lookup of each hop-by-hop name.
	for k := range h {
		switch k {
		case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
			"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
			delete(h, k)
		}
	}
}

// skipRequestHeader reports whether the client's header k is not sent to
// the instance as it is: hop-by-hop headers (conn is the Connection
// header, whose tokens name more), the forwarding headers the proxy sets
// itself, and those written apart (Host, User-Agent, Content-Length).
func skipRequestHeader(k string, conn []string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
		"Host", "User-Agent", "Content-Length":
		return true
	}
	for _, f := range conn {
		for sf := range strings.SplitSeq(f, ",") {
			if strings.EqualFold(textproto.TrimString(sf), k) {
				return true
			}
		}
	}
	return false
}

// writeHead writes the request head the instance gets for r: what
// httputil.ReverseProxy with the pool's Rewrite sends (the client's Host,
// X-Forwarded-For, -Host and -Proto set anew, hop-by-hop headers
// dropped, unparsable query parameters removed), as http.Request.Write
// would. A header http.Transport would refuse is an error.
func writeHead(bw *bufio.Writer, r *http.Request, target string) error {
	if !httpguts.ValidHeaderFieldName(r.Method) {
		return fmt.Errorf("invalid method %q", r.Method)
	}
	q := cleanQuery(r.URL.RawQuery)
	if !validTarget(q) {
		return fmt.Errorf("invalid query %q", q)
	}
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.URL.EscapedPath())
	if q != "" || r.URL.ForceQuery {
		bw.WriteByte('?')
		bw.WriteString(q)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	host := r.Host
	if host == "" {
		host = target
	}
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if ua := r.Header["User-Agent"]; len(ua) > 0 && ua[0] != "" {
		if err := writeHeader(bw, "User-Agent", ua[0]); err != nil {
			return err
		}
	}
	conn := r.Header["Connection"]
	for k, vv := range r.Header {
		if skipRequestHeader(k, conn) {
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("invalid header field name %q", k)
		}
		for _, v := range vv {
			if err := writeHeader(bw, k, v); err != nil {
				return err
			}
		}
	}
	if httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers") {
		bw.WriteString("Te: trailers\r\n")
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if err := writeHeader(bw, "X-Forwarded-For", ip); err != nil {
			return err
		}
	}
	if err := writeHeader(bw, "X-Forwarded-Host", r.Host); err != nil {
		return err
	}
	if r.TLS != nil {
		bw.WriteString("X-Forwarded-Proto: https\r\n")
	} else {
		bw.WriteString("X-Forwarded-Proto: http\r\n")
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		bw.WriteString("Content-Length: 0\r\n")
	}
	_, err := bw.WriteString("\r\n")
	return err
}

// validTarget reports whether s may be written in a request line: no
// space or control byte, which would end or break it.
func validTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// writeHeader writes one header line; a value with a byte a header may
// not hold is an error.
func writeHeader(bw *bufio.Writer, k, v string) error {
	if !httpguts.ValidHeaderFieldValue(v) {
		return fmt.Errorf("invalid header field value for %q", k)
	}
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(textproto.TrimString(v))
	_, err := bw.WriteString("\r\n")
	return err
}

// cleanQuery is q without the parameters url.ParseQuery cannot parse (a
// semicolon, a bad escape), as httputil.ReverseProxy sends it; a clean
// query is returned as it is.
func cleanQuery(q string) string {
	for i := 0; i < len(q); {
		switch q[i] {
		case ';':
			return reencodeQuery(q)
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return reencodeQuery(q)
			}
			i += 3
		default:
			i++
		}
	}
	return q
}

func reencodeQuery(q string) string {
	v, _ := url.ParseQuery(q)
	return v.Encode()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
