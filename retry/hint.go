package retry

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrBadRetryAfter is wrapped by the errors of [ParseRetryAfter] and
// [ParseAmzRetryAfter].
var ErrBadRetryAfter = errors.New("retry: malformed retry-after value")

// maxHintSeconds bounds a delta-seconds value so that it fits a Duration.
const maxHintSeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter parses the value of an HTTP Retry-After header (RFC 9110
// §10.2.3): either a non-negative number of seconds or an HTTP-date, which is
// turned into the time left after now (zero when the date is past). Values
// too large for a time.Duration saturate at the largest Duration.
func ParseRetryAfter(value string, now time.Time) (time.Duration, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, fmt.Errorf("%w: empty Retry-After", ErrBadRetryAfter)
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > maxHintSeconds {
			return time.Duration(math.MaxInt64), nil
		}
		return time.Duration(secs) * time.Second, nil
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, fmt.Errorf("%w: Retry-After %q is neither seconds nor an HTTP-date", ErrBadRetryAfter, value)
	}
	if d := t.Sub(now); d > 0 {
		return d, nil
	}
	return 0, nil
}

// ParseAmzRetryAfter parses the value of an X-Amz-Retry-After header: a
// non-negative number of milliseconds. Values too large for a time.Duration
// saturate at the largest Duration.
func ParseAmzRetryAfter(value string) (time.Duration, error) {
	v := strings.TrimSpace(value)
	if !isDigits(v) {
		return 0, fmt.Errorf("%w: X-Amz-Retry-After %q is not a number of milliseconds", ErrBadRetryAfter, value)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// HeaderHint returns the wait a server asked for in h: the larger of the
// valid Retry-After and X-Amz-Retry-After values. It reports false when
// neither header holds a valid value; malformed values are ignored.
func HeaderHint(h http.Header, now time.Time) (time.Duration, bool) {
	var (
		hint  time.Duration
		found bool
	)
	if v := h.Get("Retry-After"); v != "" {
		if d, err := ParseRetryAfter(v, now); err == nil {
			hint, found = d, true
		}
	}
	if v := h.Get("X-Amz-Retry-After"); v != "" {
		if d, err := ParseAmzRetryAfter(v); err == nil {
			hint, found = max(hint, d), true
		}
	}
	return hint, found
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
