// Package retry runs an operation again after transient failures, waiting a
// little longer each time: truncated exponential backoff with jitter, bounded
// by a deadline and, optionally, by a client-side retry budget.
//
// # Default policy
//
// The default policy is the one recommended for callers of throttled cloud
// APIs. Before retry n (n = 0, 1, 2, …) the caller waits
//
//	min(2^n·unit + random_fraction·unit, maximum_backoff)
//
// with unit = 1 s, maximum_backoff = 32 s and random_fraction drawn uniformly
// from [0, 1) anew for every retry: 1+r, 2+r, 4+r, 8+r, 16+r, 32, 32 … seconds.
// It stops retrying once the next wait would cross the deadline: 300 s after
// the first attempt started, or the context's deadline when that is earlier.
// The deadline bounds when a new attempt may start, never an attempt in
// flight: a slow answer, or a response body still streaming, is cut only by
// the caller's context or by the per-attempt timeout [WithAttemptTimeout]
// (none by default).
// Every parameter is an [Option]; other schedules ([FullJitter],
// [EqualJitter], [DecorrelatedJitter], [Constant]) implement the same
// [Schedule] interface.
//
// # What is retried
//
// [DefaultClassifier] retries HTTP 500, 502, 503 and 504, connection refused
// and connection reset errors, and per-attempt timeouts. HTTP 429 and the AWS
// SDK's throttling error codes ([ThrottleCodes]) are retried too unless
// [WithThrottleRetries](false) is given. It never retries context
// cancellation or the caller's deadline, other 4xx statuses, TLS and
// certificate errors, or errors wrapped with [Permanent]. [WithClassifier]
// plugs in another rule.
//
// Errors carry their HTTP status through a method HTTPStatusCode() int (as
// [*StatusError] and the AWS SDK's response errors do) and their API error
// code through ErrorCode() string (as smithy-go's APIError does).
//
// # Server hints
//
// When an error has a method RetryAfter(now time.Time) (time.Duration, bool),
// as [*StatusError] does for the Retry-After and X-Amz-Retry-After headers,
// the wait is max(backoff, min(hint, ceiling)). By default the ceiling is
// maximum_backoff, so a hint may lengthen a wait only up to it:
// with Retry-After: 120 and the default 32 s maximum_backoff the wait is
// 32 s. [WithMaxHint] sets a larger ceiling (or, non-positive, ignores
// hints). A wait that would cross the deadline is never started: the call
// returns at once with the last error.
//
// # HTTP
//
// [Transport] is a [net/http.RoundTripper] that applies a [Policy] to HTTP
// requests. It retries only requests that are safe to repeat (see
// [SafeToRetry] and [MarkRetryable]), rewinds request bodies, and drains
// and closes responses it discards. [WithAttemptTimeout] bounds each attempt.
//
// # Errors
//
// A call that fails returns an [*Error]: errors.As reports the number of
// attempts, errors.Is and errors.As find the last attempt's error, and
// errors.Is also finds why retrying stopped ([ErrDeadline],
// [ErrBudgetExhausted], [ErrAttemptsExhausted] or the context's error).
//
// # Retry budget
//
// A [Budget] shared by the calls to one dependency bounds the extra load
// retries add when it fails: [DefaultTokenBudget] has the AWS SDK's shape,
// [NewRatioBudget] holds retries to a share of calls. An empty budget fails
// the call at once with [ErrBudgetExhausted].
//
// The AWS SDK for Go v2 adapter is in the sub-package awsretry.
//
// # Time and randomness
//
// All waits go through a [Clock] and all random draws come from a [Rand],
// both injectable, so tests and simulators run on virtual time with a
// seeded source.
package retry
