package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"syscall"

	"github.com/tollgate/tollgate/internal/proxybuf"

	"github.com/tollgate/tollgate/awsjson"
)

// UpstreamFailure is what a reverse proxy answers and logs when the
// upstream could not be reached or did not answer; see [ClassifyUpstreamError].
type UpstreamFailure struct {
	// Status is the HTTP status of the answer: 503 when the upstream could
	// not be reached or failed, 504 when it did not answer in time.
	Status int
	// Code is the AWS error code for the answer (X-Amzn-ErrorType and
	// __type): ServiceUnavailableException or RequestTimeoutException,
	// both of which the AWS SDKs retry.
	Code string
	// Message is the answer's message; it names no address or internals.
	Message string
	// Reason is a short word for the log: "client_gone", "timeout",
	// "refused" or "failed".
	Reason string
	// Level is the log level: Debug for a client that went away (routine,
	// nothing is wrong upstream), else Warn.
	Level slog.Level
}

// ClassifyUpstreamError sorts an error of an httputil.ReverseProxy's
// transport for request r into what to answer and how loudly to log it, so
// that every proxy in tollgate treats failures alike:
//
//   - the client went away (r's context was canceled): Debug, and the answer
//     goes nowhere;
//   - a timeout (a dial, header or context deadline): 504
//     RequestTimeoutException, Warn;
//   - a refused connection: 503 ServiceUnavailableException, Warn;
//   - anything else (reset, bad response, DNS): 503, Warn.
func ClassifyUpstreamError(r *http.Request, err error) UpstreamFailure {
	f := UpstreamFailure{
		Status:  http.StatusServiceUnavailable,
		Code:    "ServiceUnavailableException",
		Message: "upstream unavailable",
		Reason:  "failed",
		Level:   slog.LevelWarn,
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(r.Context().Err(), context.Canceled):
		f.Reason, f.Level = "client_gone", slog.LevelDebug
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &netErr) && netErr.Timeout():
		f.Status, f.Code, f.Message, f.Reason = http.StatusGatewayTimeout, "RequestTimeoutException", "upstream timed out", "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		f.Reason = "refused"
	}
	return f
}

// upstreamTransport carries every throttled service's proxied requests:
// http.DefaultTransport's settings, but enough idle connections per
// upstream for a busy service (the default keeps 2, so under concurrency
// every other request opened a new connection), and bodies passed through
// as the upstream sent them (no gzip asked for on the client's behalf).
var upstreamTransport = func() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	tr.DisableCompression = true
	return tr
}()

func (g *Gateway) newProxy(service string, u *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport:  upstreamTransport,
		BufferPool: proxybuf.Buffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // as the client sent (and signed) it
			pr.SetXForwarded()
		},
		// The upstream's request id, when it sends one, is the answer's
		// only one; otherwise tollgate's stands.
		ModifyResponse: func(resp *http.Response) error {
			if resp.Header.Get(awsjson.HeaderRequestID) == "" {
				if id, ok := resp.Request.Context().Value(requestIDKey{}).(string); ok {
					resp.Header.Set(awsjson.HeaderRequestID, id)
				}
			}
			return nil
		},
		// No upstream answer: tollgate's request id goes on the answer
		// (serveAWS took it off for ModifyResponse) and in the log line.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			id, _ := r.Context().Value(requestIDKey{}).(string)
			f := ClassifyUpstreamError(r, err)
			g.log.Log(r.Context(), f.Level, "upstream failed", "request_id", id, "service", service,
				"upstream", u.Redacted(), "reason", f.Reason, "error", err)
			if id != "" {
				w.Header()[awsjson.HeaderRequestID] = []string{id}
			}
			awsjson.WriteError(w, f.Status, f.Code, f.Message)
		},
	}
}
