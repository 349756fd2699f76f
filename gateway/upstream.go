package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
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
