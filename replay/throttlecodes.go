package replay

// serviceThrottle reports whether a record's errorCode is one its
// service's table names as a throttle (any of its categories' codes and
// its ThrottleCodes), with or without EC2's "Client." prefix; isThrottle
// covers the AWS SDK's codes and the action's own.
func (r *run) serviceThrottle(rec *Record) bool {
	svc := r.service(rec.Source)
	return svc != nil && (svc.IsThrottleCode(rec.ErrorCode) || svc.IsThrottleCode(faultCode(rec.ErrorCode)))
}
