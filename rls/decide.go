package rls

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

// shadowLogEvery spaces the log lines of one shadow-mode rule's over-limit
// decisions.
const shadowLogEvery = 10 * time.Second

// validate checks what envoy ratelimit checks (a domain, some
// descriptors) within the request's bound. A descriptor that cannot match
// a rule (no entries, an entry without a key, more entries than any rule
// is deep) is not an error of the request: it is answered OK, as envoy
// ratelimit answers it, and the others are decided (see [usable]).
func validate(req *rlspb.RateLimitRequest) error {
	// envoy ratelimit refuses these two with a plain error, which gRPC
	// sends as UNKNOWN; clients written for it may look for that code.
	if req.GetDomain() == "" {
		return status.Error(codes.Unknown, "rate limit domain must not be empty")
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return status.Error(codes.Unknown, "rate limit descriptor list must not be empty")
	}
	if len(descs) > MaxDescriptors {
		return status.Errorf(codes.InvalidArgument, "%d descriptors: at most %d are allowed in one request", len(descs), MaxDescriptors)
	}
	return nil
}

// usable reports whether a descriptor can match a rule: it has entries,
// at most MaxEntries, each with a key.
func usable(d *ratelimitv3.RateLimitDescriptor) bool {
	entries := d.GetEntries()
	if len(entries) == 0 || len(entries) > MaxEntries {
		return false
	}
	for _, e := range entries {
		if e.GetKey() == "" {
			return false
		}
	}
	return true
}

// hitsAddend is envoy ratelimit's GetHitsAddends for one descriptor: its
// own hits_addend when set (0 means look without taking), else the
// request's, where 0 means 1. is_negative_hits is charged like any hit,
// as envoy ratelimit (which does not read the field) charges it.
func hitsAddend(req *rlspb.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	return max(1, uint64(req.GetHitsAddend()))
}

// override fills sl from a descriptor's limit override, which envoy
// ratelimit applies instead of the config (never in shadow mode).
func (s *Server) override(sl *slot, i int, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) error {
	unit := Unit(o.GetUnit())
	window, ok := unitDurations[unit]
	if !ok {
		return status.Errorf(codes.InvalidArgument, "descriptors[%d].limit.unit %s: want SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR", i, o.GetUnit())
	}
	current := &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: o.GetRequestsPerUnit(), Unit: unit}
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
		if time.Duration(m.GetValue()) > bucket.Never/window {
			return status.Errorf(codes.InvalidArgument, "descriptors[%d].limit: %d × %s is too long", i, m.GetValue(), unit)
		}
		window *= time.Duration(m.GetValue())
		current.UnitMultiplier = m
	}
	lim, err := newLimit(o.GetRequestsPerUnit(), window)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "descriptors[%d].limit: %v", i, err)
	}
	if !lim.IsZero() && s.maxWindow > 0 {
		if w := time.Duration(lim.Capacity()) * lim.Interval(); w > s.maxWindow || w < 0 {
			return status.Errorf(codes.InvalidArgument, "descriptors[%d].limit: %d per %s refills over longer than the %s the store holds",
				i, o.GetRequestsPerUnit(), days(window), days(s.maxWindow))
		}
	}
	sl.limit, sl.current, sl.window = lim, current, window
	sl.rule = overrideRule
	return nil
}

// overrideRule stands for a request's limit override in a slot.
var overrideRule = &Rule{Key: overrideKey}

// decide takes the tokens of every limited slot with one TakeBatch and
// builds the answer.
func (s *Server) decide(ctx context.Context, req *rlspb.RateLimitRequest, slots []slot) (*rlspb.RateLimitResponse, error) {
	reqs := make([]limiter.Request, 0, len(slots))
	for i := range slots {
		sl := &slots[i]
		if sl.rule == nil || sl.limit.IsZero() {
			continue
		}
		sl.batch = len(reqs)
		reqs = append(reqs, limiter.Request{
			Key:    BucketKey(req.GetDomain(), req.GetDescriptors()[i].GetEntries(), sl.shared),
			Limit:  sl.limit,
			Tokens: int64(min(sl.hits, uint64(sl.limit.Capacity())+1)), // more than the capacity is denied alike
		})
	}
	var out []bucket.Decision
	if len(reqs) > 0 {
		out = make([]bucket.Decision, len(reqs))
		if err := s.limiter.TakeBatch(ctx, reqs, out); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, status.FromContextError(ctxErr).Err()
			}
			s.metrics.storeErrors.Inc()
			s.log.Warn("rate limit store could not decide", "domain", req.GetDomain(), "error", err)
			if errors.Is(err, limiter.ErrInvalidRequest) {
				return nil, status.Errorf(codes.InvalidArgument, "store refused the request: %v", err)
			}
			return nil, status.Errorf(codes.Unavailable, "rate limit store: %v", err)
		}
	}
	resp := &rlspb.RateLimitResponse{Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(slots))}
	var (
		minRemaining     uint32 = math.MaxUint32
		minimum          *rlspb.RateLimitResponse_DescriptorStatus
		failedRateLimits int
		failedQuota      int
		totalQuota       int
	)
	for i := range slots {
		sl := &slots[i]
		st := s.status(sl, out)
		resp.Statuses[i] = st
		if s.observer != nil && sl.rule != nil {
			s.observe(req, i, sl, st, out)
		}
		if s.headers && st.CurrentLimit != nil && st.LimitRemaining < minRemaining {
			minimum, minRemaining = st, st.LimitRemaining
		}
		if sl.unlimited {
			continue
		}
		if st.Code == rlspb.RateLimitResponse_OVER_LIMIT { // not in shadow mode
			if sl.quota {
				failedQuota++
			} else {
				failedRateLimits++
				minimum, minRemaining = st, 0
			}
		}
		if sl.quota {
			totalQuota++
		}
	}
	resp.OverallCode = rlspb.RateLimitResponse_OK
	if failedRateLimits > 0 || (totalQuota > 0 && totalQuota == failedQuota) {
		resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
	}
	if s.headers && minimum != nil {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: s.limitHeader, Value: strconv.FormatUint(uint64(minimum.CurrentLimit.GetRequestsPerUnit()), 10)},
			{Key: s.remainingHeader, Value: strconv.FormatUint(uint64(minimum.LimitRemaining), 10)},
			{Key: s.resetHeader, Value: strconv.FormatInt(ceilSeconds(minimum.DurationUntilReset.AsDuration()), 10)},
		}
	}
	if resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT && s.globalShadow {
		resp.OverallCode = rlspb.RateLimitResponse_OK
		s.metrics.globalShadowMode.Inc()
	}
	return resp, nil
}

// observe tells the observer of one descriptor's decision.
func (s *Server) observe(req *rlspb.RateLimitRequest, i int, sl *slot, st *rlspb.RateLimitResponse_DescriptorStatus, out []bucket.Decision) {
	d := Decided{Domain: req.GetDomain(), Rule: sl.rule.Key, Descriptor: descriptorText(req.GetDescriptors()[i].GetEntries(), sl.shared)}
	d.Allowed = st.Code == rlspb.RateLimitResponse_OK && !sl.overShadow
	if sl.batch >= 0 {
		b := out[sl.batch]
		d.Capacity = sl.limit.Capacity()
		d.Used = d.Capacity - min(max(b.Remaining, 0), d.Capacity)
	}
	s.observer.Decided(d)
}

// status is one descriptor's answer, counted. A shadow-mode rule's answer
// over its limit is counted as over but has the code OK.
func (s *Server) status(sl *slot, out []bucket.Decision) *rlspb.RateLimitResponse_DescriptorStatus {
	switch {
	case sl.unlimited:
		return &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
	case sl.rule == nil:
		return &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
	}
	var used, capacity uint64
	var retry time.Duration
	st := &rlspb.RateLimitResponse_DescriptorStatus{CurrentLimit: sl.current}
	if sl.batch < 0 { // 0 requests per unit: every hit is over, no bucket
		st.DurationUntilReset = durationpb.New(sl.window)
	} else {
		d := out[sl.batch]
		capacity = uint64(sl.limit.Capacity())
		remaining := uint64(max(d.Remaining, 0))
		used = capacity - min(remaining, capacity)
		if d.Allowed {
			used -= min(sl.hits, used) // the use before this take
		}
		st.LimitRemaining = uint32(min(remaining, math.MaxUint32))
		// Never longer than the rule's window: a bucket whose refill
		// interval was rounded up to a whole nanosecond can take a
		// little longer to fill than its unit.
		st.DurationUntilReset = durationpb.New(min(d.ResetAfter, sl.window))
		retry = d.RetryAfter
	}
	over := sl.counters.count(used, sl.hits, capacity, s.nearRatio)
	st.Code = rlspb.RateLimitResponse_OK
	if over && !sl.shadow {
		// What a client reads on a refusal: nothing left for it, and how
		// long to wait before the same hits would be admitted (the
		// window, when they exceed the limit itself).
		st.LimitRemaining = 0
		if retry <= 0 || retry > sl.window {
			retry = sl.window
		}
		st.DurationUntilReset = durationpb.New(retry)
	}
	if over {
		st.Code = rlspb.RateLimitResponse_OVER_LIMIT
		if sl.shadow {
			st.Code = rlspb.RateLimitResponse_OK
			sl.overShadow = true
			sl.counters.countShadow(used, sl.hits, capacity)
			s.logShadow(sl)
		}
	}
	return st
}

// logShadow logs a shadow-mode rule's over-limit decision, at most once per
// shadowLogEvery for each rule.
func (s *Server) logShadow(sl *slot) {
	now := time.Now().Unix()
	last := sl.counters.lastShadowLog.Load()
	if now-last < int64(shadowLogEvery/time.Second) || !sl.counters.lastShadowLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Info("shadow mode: over the limit, answered OK", "domain", sl.rule.Domain, "key", sl.rule.Key,
		"limit", sl.current.GetRequestsPerUnit(), "unit", sl.current.GetUnit().String())
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
