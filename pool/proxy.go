package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/tollgate/tollgate/internal/proxybuf"
)

// proxy forwards a revision's requests to the instance each was routed
// to (in the request context): the forwarder (forward.go) takes the
// common request, httputil.ReverseProxy every other. Both keep enough
// idle connections per instance for its whole concurrency and answer a
// failure with the same error status.
type proxy struct {
	rv    *revision
	rp    *httputil.ReverseProxy
	conns *upConns // the forwarder's connections
}

// ServeHTTP forwards r to its instance.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in, _ := r.Context().Value(instanceKey{}).(*instance)
	if in == nil || !fastPath(r) {
		p.rp.ServeHTTP(w, r)
		return
	}
	if err := p.forward(w, r, in.url.Host); err != nil {
		p.rp.ErrorHandler(w, r, err)
	}
}

// CloseIdleConnections closes the idle connections to every instance.
func (p *proxy) CloseIdleConnections() {
	p.conns.closeIdle()
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
}

// newProxy returns the revision's one proxy. Rewrite reads the chosen
// instance from the request context.
func newProxy(rv *revision, maxConcurrency int) *proxy {
	maxIdle := max(maxConcurrency, http.DefaultMaxIdleConnsPerHost)
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
			in := pr.In.Context().Value(instanceKey{}).(*instance)
			pr.SetURL(in.url)
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
			in, _ := r.Context().Value(instanceKey{}).(*instance)
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
				msg = fmt.Sprintf("service %s: the request timeout passed before the instance answered", rv.service)
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
			case status == http.StatusBadGateway && in != nil && in.run != nil:
				// A dropped connection usually means the instance died;
				// its exit is noticed a moment later. Wait briefly for it,
				// so the answer says what happened, and, when it exited on
				// its own, until the engine was told (revision.gone): the
				// request still runs there then, so the crash's log line
				// counts it among the requests that failed with it.
				t := time.NewTimer(time.Second)
				select {
				case <-in.gone:
				case <-in.run.Done():
					if in.killed.Load() == nil {
						select {
						case <-in.gone:
						case <-t.C:
						}
					}
				case <-t.C:
				}
				t.Stop()
				if exited, why := in.exitedErr(); exited {
					msg = fmt.Sprintf("instance %s of service %s exited while serving the request (%v)", in.name, rv.service, why)
				}
			}
			name := ""
			if in != nil {
				name = in.name
			}
			rv.log.Log(r.Context(), level, "proxy failed", "instance", name, "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
			http.Error(w, msg, status)
		},
	}
	return &proxy{rv: rv, rp: rp, conns: newUpConns(maxIdle)}
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
