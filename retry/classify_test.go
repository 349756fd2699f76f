package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// apiError mimics smithy-go's APIError and the AWS SDK's response errors.
type apiError struct {
	code   string
	status int
}

func (e apiError) Error() string       { return e.code }
func (e apiError) ErrorCode() string   { return e.code }
func (e apiError) HTTPStatusCode() int { return e.status }

// canceledError mimics aws.RequestCanceledError.
type canceledError struct{}

func (canceledError) Error() string       { return "request canceled" }
func (canceledError) CanceledError() bool { return true }

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// Errors as the standard library and the AWS SDK wrap them.
func wrapURL(err error) error { return &url.Error{Op: "Get", URL: "http://x", Err: err} }
func wrapf(err error) error   { return fmt.Errorf("calling service: %w", err) }
func status(code int) error   { return &StatusError{StatusCode: code} }
func throttle(code string, st int) error {
	return wrapf(apiError{code, st})
}
func refused() error {
	return wrapURL(&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}})
}
func reset() error          { return wrapURL(&net.OpError{Op: "read", Err: syscall.ECONNRESET}) }
func attemptTimeout() error { return wrapURL(context.DeadlineExceeded) }
func netTimeout() error     { return wrapURL(timeoutError{}) }
func canceled() error       { return wrapURL(context.Canceled) }
func sdkCanceled() error    { return wrapf(canceledError{}) }
func certErr() error        { return wrapURL(x509.UnknownAuthorityError{}) }
func verifyErr() error {
	return wrapURL(&tls.CertificateVerificationError{Err: errors.New("bad")})
}
func hostErr() error            { return wrapURL(x509.HostnameError{Host: "x"}) }
func alertErr() error           { return wrapURL(tls.AlertError(40)) }
func invalidErr() error         { return wrapURL(x509.CertificateInvalidError{Reason: x509.Expired}) }
func recordErr() error          { return wrapURL(tls.RecordHeaderError{Msg: "not tls"}) }
func permanent503() error       { return Permanent(status(503)) }
func plain() error              { return errors.New("boom") }
func validation() error         { return throttle("ValidationException", 400) }
func requestTimeoutCode() error { return throttle("RequestTimeout", 400) }

func TestDefaultClassifier(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want Class
	}{
		{"500", status(500), Retryable},
		{"502", status(502), Retryable},
		{"503", status(503), Retryable},
		{"504", status(504), Retryable},
		{"429", status(429), Throttle},
		{"400", status(400), NotRetryable},
		{"401", status(401), NotRetryable},
		{"403", status(403), NotRetryable},
		{"404", status(404), NotRetryable},
		{"409", status(409), NotRetryable},
		{"501", status(501), NotRetryable},
		{"connection refused", refused(), Retryable},
		{"connection reset", reset(), Retryable},
		{"per-attempt timeout", attemptTimeout(), Retryable},
		{"net timeout", netTimeout(), Retryable},
		{"context canceled", canceled(), NotRetryable},
		{"sdk canceled", sdkCanceled(), NotRetryable},
		{"unknown authority", certErr(), NotRetryable},
		{"verification", verifyErr(), NotRetryable},
		{"hostname", hostErr(), NotRetryable},
		{"expired", invalidErr(), NotRetryable},
		{"tls alert", alertErr(), NotRetryable},
		{"tls record", recordErr(), NotRetryable},
		{"permanent 503", permanent503(), NotRetryable},
		{"plain error", plain(), NotRetryable},
		{"validation 400", validation(), NotRetryable},
		{"RequestTimeout code", requestTimeoutCode(), Retryable},
		{"nil", nil, NotRetryable},
	}
	for _, code := range ThrottleCodes() {
		cases = append(cases, struct {
			name string
			err  error
			want Class
		}{code, throttle(code, 400), Throttle})
	}
	for _, c := range cases {
		if got := DefaultClassifier().Classify(c.err); got != c.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestThrottleCodesMatchAWSSDK(t *testing.T) {
	want := []string{
		"Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
		"TooManyRequestsException", "ProvisionedThroughputExceededException",
		"TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
		"LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
		"EC2ThrottledException",
	}
	if len(ThrottleCodes()) != len(want) {
		t.Fatalf("%d codes, want %d", len(ThrottleCodes()), len(want))
	}
	for _, c := range want {
		if !IsThrottleCode(c) {
			t.Errorf("missing %s", c)
		}
	}
}

func TestPolicyClassifyThrottleSwitch(t *testing.T) {
	if c := New(WithThrottleRetries(false)).Classify(status(http.StatusTooManyRequests)); c != NotRetryable {
		t.Fatalf("throttle retries off: %v", c)
	}
	if c := New().Classify(throttle("SlowDown", 503)); c != Throttle {
		t.Fatalf("default: %v", c)
	}
}

func TestPermanentUnwraps(t *testing.T) {
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
	cause := status(503)
	err := Permanent(cause)
	if !errors.Is(err, cause) || err.Error() != cause.Error() {
		t.Fatalf("Permanent hides its cause: %v", err)
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{NotRetryable: "not-retryable", Retryable: "retryable", Throttle: "throttle", Class(9): "Class(9)"} {
		if c.String() != want {
			t.Errorf("%d.String() = %q", int(c), c.String())
		}
	}
}

// Each class through Do: retryable ones are attempted twice under
// WithMaxAttempts(2), the others once.
func TestDoEachClass(t *testing.T) {
	for _, c := range []struct {
		err   error
		calls int
	}{
		{status(500), 2}, {status(502), 2}, {status(503), 2}, {status(504), 2}, {status(429), 2},
		{throttle("ThrottlingException", 400), 2}, {throttle("RequestLimitExceeded", 503), 2},
		{refused(), 2}, {reset(), 2}, {attemptTimeout(), 2}, {netTimeout(), 2},
		{status(400), 1}, {status(404), 1}, {canceled(), 1}, {certErr(), 1}, {verifyErr(), 1},
		{permanent503(), 1}, {plain(), 1}, {validation(), 1},
	} {
		fn, calls := failing(5, c.err)
		err := Do(context.Background(), fn, WithClock(newFakeClock()), WithMaxAttempts(2))
		if *calls != c.calls || !errors.Is(err, c.err) {
			t.Errorf("%v: calls = %d, want %d (err %v)", c.err, *calls, c.calls, err)
		}
	}
}
