package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// Class is the verdict of a [Classifier] on a failed attempt.
type Class int

const (
	// NotRetryable means the error is final: retrying cannot help or is unsafe.
	NotRetryable Class = iota
	// Retryable means the error is transient: a server error, a broken
	// connection or an attempt that timed out.
	Retryable
	// Throttle means the server asked the client to slow down (HTTP 429 or a
	// throttling error code). It is retried unless throttle retries are
	// switched off, and costs less from a token [Budget].
	Throttle
)

// String returns the name of the class.
func (c Class) String() string {
	switch c {
	case NotRetryable:
		return "not-retryable"
	case Retryable:
		return "retryable"
	case Throttle:
		return "throttle"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// A Classifier decides whether a failed attempt may be retried. The retry
// loop calls it only with non-nil errors and only while the caller's context
// is still live, so a context error it sees comes from a per-attempt timeout.
type Classifier interface {
	Classify(err error) Class
}

// ClassifierFunc adapts a function to the [Classifier] interface.
type ClassifierFunc func(err error) Class

// Classify returns f(err).
func (f ClassifierFunc) Classify(err error) Class { return f(err) }

// throttleCodes is the AWS SDK for Go v2's list of throttling error codes
// (aws/retry.DefaultThrottleErrorCodes). It is never modified.
var throttleCodes = map[string]struct{}{
	"Throttling":                             {},
	"ThrottlingException":                    {},
	"ThrottledException":                     {},
	"RequestThrottledException":              {},
	"TooManyRequestsException":               {},
	"ProvisionedThroughputExceededException": {},
	"TransactionInProgressException":         {},
	"RequestLimitExceeded":                   {},
	"BandwidthLimitExceeded":                 {},
	"LimitExceededException":                 {},
	"RequestThrottled":                       {},
	"SlowDown":                               {},
	"PriorRequestNotComplete":                {},
	"EC2ThrottledException":                  {},
}

// transientCodes are API error codes for timeouts on the server side, which
// the AWS SDK also retries (aws/retry.DefaultRetryableErrorCodes). It is
// never modified.
var transientCodes = map[string]struct{}{
	"RequestTimeout":          {},
	"RequestTimeoutException": {},
}

// IsThrottleCode reports whether code, an error's ErrorCode(), is in the AWS
// SDK for Go v2's list of throttling error codes
// (aws/retry.DefaultThrottleErrorCodes).
func IsThrottleCode(code string) bool {
	_, ok := throttleCodes[code]
	return ok
}

// IsTransientCode reports whether code, an error's ErrorCode(), names a
// timeout on the server side that the AWS SDK also retries
// (aws/retry.DefaultRetryableErrorCodes).
func IsTransientCode(code string) bool {
	_, ok := transientCodes[code]
	return ok
}

// ThrottleCodes returns the codes for which [IsThrottleCode] is true, sorted.
func ThrottleCodes() []string { return slices.Sorted(maps.Keys(throttleCodes)) }

// TransientCodes returns the codes for which [IsTransientCode] is true,
// sorted.
func TransientCodes() []string { return slices.Sorted(maps.Keys(transientCodes)) }

// DefaultClassifier returns the classification described in the package
// documentation. In order, an error is:
//
//   - NotRetryable if it is wrapped with [Permanent], is or wraps
//     context.Canceled, reports CanceledError() true (the AWS SDK's
//     cancellation), or is a TLS or certificate error;
//   - Throttle if its ErrorCode() is in [IsThrottleCode] or its
//     HTTPStatusCode() is 429;
//   - Retryable if its ErrorCode() is [IsTransientCode], its
//     HTTPStatusCode() is 500, 502, 503 or 504, it is a connection refused
//     or reset error, it is or wraps context.DeadlineExceeded (a per-attempt
//     timeout: the loop has already checked the caller's context), or it is
//     a net.Error whose Timeout() is true;
//   - NotRetryable otherwise, including every other HTTP status.
func DefaultClassifier() Classifier { return ClassifierFunc(classify) }

func classify(err error) Class {
	if err == nil {
		return NotRetryable
	}
	var perm *permanentError
	if errors.As(err, &perm) || errors.Is(err, context.Canceled) {
		return NotRetryable
	}
	var canceled interface{ CanceledError() bool }
	if errors.As(err, &canceled) && canceled.CanceledError() {
		return NotRetryable
	}
	if isTLSError(err) {
		return NotRetryable
	}
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) {
		code := coded.ErrorCode()
		if IsThrottleCode(code) {
			return Throttle
		}
		if IsTransientCode(code) {
			return Retryable
		}
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		switch status.HTTPStatusCode() {
		case http.StatusTooManyRequests:
			return Throttle
		case http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return Retryable
		}
		return NotRetryable
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return Retryable
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Retryable
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Retryable
	}
	return NotRetryable
}

func isTLSError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
		record           tls.RecordHeaderError
		alert            tls.AlertError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verification) ||
		errors.As(err, &record) || errors.As(err, &alert)
}

// Permanent marks err as final: [DefaultClassifier] never retries it, and
// errors.Is and errors.As see through the mark. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// StatusError is a failed HTTP response as an error: its status code and
// headers, from which [DefaultClassifier] and the retry loop read the class
// and the server's Retry-After hint. [Transport] builds one for every
// response with a status of 400 or more.
type StatusError struct {
	// StatusCode is the response's HTTP status code.
	StatusCode int
	// Header is the response's header, read for Retry-After hints.
	Header http.Header
}

// Error returns the status line, for example "retry: HTTP 503 Service Unavailable".
func (e *StatusError) Error() string {
	return "retry: HTTP " + strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
}

// HTTPStatusCode returns e.StatusCode.
func (e *StatusError) HTTPStatusCode() int { return e.StatusCode }

// RetryAfter returns the wait asked for by the Retry-After or
// X-Amz-Retry-After header, as [HeaderHint] does.
func (e *StatusError) RetryAfter(now time.Time) (time.Duration, bool) {
	return HeaderHint(e.Header, now)
}
