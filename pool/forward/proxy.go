package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/internal/proxybuf"
)

// Options configure a Proxy. The zero value works.
type Options struct {
	// Service names the service in the error answers; "" leaves it empty.
	Service string
	// Logger receives the failed attempts; nil discards them.
	Logger *slog.Logger
	// MaxConcurrency is the most requests one instance takes at once:
	// the proxy keeps that many idle connections per instance, and at
	// least http.DefaultMaxIdleConnsPerHost.
	MaxConcurrency int
}

// Target is the instance a request was routed to.
type Target interface {
	// Name names the instance in the log.
	Name() string
	// URL is where its requests go (scheme and host).
	URL() *url.URL
	// AwaitExit is asked after a dropped connection, which usually means
	// the instance died: it waits briefly for its exit to be known and
	// reports whether it has exited, and why.
	AwaitExit() (exited bool, why error)
}

// Proxy forwards a revision's requests to the instance each was routed
// to (Serve's target): the forwarder (forward.go) takes the common
// request, httputil.ReverseProxy every other. Both keep enough idle
// connections per instance for its whole concurrency and answer a
// failure with the same error status. It is safe for concurrent use.
type Proxy struct {
	service string
	log     *slog.Logger
	rp      *httputil.ReverseProxy
	conns   *upConns // the forwarder's connections
}

// targetKey carries the chosen instance in a proxied request's context.
type targetKey struct{}

// clientCtxKey carries the client's own request context (without the
// request timeout) to the proxy's error handler.
type clientCtxKey struct{}

// Serve forwards r to t and relays its answer to w. client is the
// client's own request context, without the request timeout r's context
// carries: the error handler tells a client that went away from a
// request that timed out by it; nil means r's.
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, t Target, client context.Context) {
	ctx := context.WithValue(r.Context(), targetKey{}, t)
	if client != nil {
		ctx = context.WithValue(ctx, clientCtxKey{}, client)
	}
	p.serveHTTP(w, r.WithContext(ctx))
}

// serveHTTP forwards r to the target in its context.
func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	in, _ := r.Context().Value(targetKey{}).(Target)
	if in == nil || !FastPath(r) {
		p.rp.ServeHTTP(w, r)
		return
	}
	if err := p.forward(w, r, in.URL().Host); err != nil {
		p.rp.ErrorHandler(w, r, err)
	}
}

// CloseIdleConnections closes the idle connections to every instance.
func (p *Proxy) CloseIdleConnections() {
	p.conns.closeIdle()
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
}

// New returns a revision's one proxy. Rewrite reads the chosen instance
// from the request context.
func New(opts Options) *Proxy {
	p := &Proxy{service: opts.Service, log: opts.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	maxIdle := max(opts.MaxConcurrency, http.DefaultMaxIdleConnsPerHost)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxIdle
	tr.MaxIdleConns = 0 // no total limit: per host bounds it
	tr.Proxy = nil      // instances are on loopback; never via an HTTP proxy
	// Bodies pass through as the instance sent them: the transport must
	// not ask for gzip on the client's behalf and inflate the answer.
	tr.DisableCompression = true
	rp := &httputil.ReverseProxy{
		Transport:  tr,
		BufferPool: proxybuf.Buffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			in := pr.In.Context().Value(targetKey{}).(Target)
			pr.SetURL(in.URL())
			pr.Out.Host = pr.In.Host // as the client sent it, as Cloud Run does
			pr.SetXForwarded()
		},
		// A status net/http cannot write (it would panic) is the
		// instance's failure, answered as one.
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode < 100 || resp.StatusCode > 999 {
				return fmt.Errorf("the instance answered with status %d", resp.StatusCode)
			}
			return nil
		},
		// Every failed attempt is answered with an error status, never
		// left to the server's implicit 200, and logged with the status
		// written: a request whose client went away is still answered
		// (nobody may read it), as the request log records.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			in, _ := r.Context().Value(targetKey{}).(Target)
			client, _ := r.Context().Value(clientCtxKey{}).(context.Context)
			if client == nil {
				client = r.Context()
			}
			status, msg := proxyError(r.Context(), err)
			level := slog.LevelWarn
			dl, timed := r.Context().Deadline()
			switch {
			case timed && !time.Now().Before(dl):
				// The request timeout passed; the client may be there
				// still (a body read cut by the deadline also ends the
				// client's context).
				status = http.StatusGatewayTimeout
				msg = fmt.Sprintf("service %s: the request timeout passed before the instance answered", p.service)
				if r.ProtoMajor == 1 {
					// The deadline also cut the server's watch on the
					// client's connection, which cancels the context of
					// every later request on it: the next would fail at
					// once. The client opens a new one.
					w.Header().Set("Connection", "close")
				}
			case client.Err() != nil:
				// The client went away, or its connection failed while
				// the request body was read.
				level = slog.LevelInfo
				status, msg = http.StatusBadGateway, "request ended before the instance answered: "+err.Error()
			case status == http.StatusBadGateway && in != nil:
				// A dropped connection usually means the instance died;
				// its exit is noticed a moment later: the target waits
				// briefly for it, so the answer says what happened.
				if exited, why := in.AwaitExit(); exited {
					msg = fmt.Sprintf("instance %s of service %s exited while serving the request (%v)", in.Name(), p.service, why)
				}
			}
			name := ""
			if in != nil {
				name = in.Name()
			}
			p.log.Log(r.Context(), level, "proxy failed", "instance", name, "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
			http.Error(w, msg, status)
		},
	}
	p.rp, p.conns = rp, newUpConns(maxIdle)
	return p
}

// proxyError maps an upstream failure to a status and message: 504 when the
// instance timed out, 502 for anything else.
func proxyError(ctx context.Context, err error) (int, string) {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return http.StatusGatewayTimeout, "instance timed out"
	}
	return http.StatusBadGateway, "instance unreachable: " + err.Error()
}
