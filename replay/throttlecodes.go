package replay

import "github.com/tollgate/tollgate/retry"

// isThrottle reports whether a record's errorCode says the call was
// throttled: a code the AWS SDK retries as a throttle, or one its
// service's table gives (EC2 logs Client.RequestLimitExceeded).
func (r *run) isThrottle(rec *Record) bool {
	if retry.IsThrottleCode(rec.ErrorCode) {
		return true
	}
	svc := r.service(rec.Source)
	return svc != nil && svc.IsThrottleCode(rec.ErrorCode)
}
