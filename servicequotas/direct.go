package servicequotas

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/awsjson"
)

// RequestIncrease is RequestServiceQuotaIncrease called from Go, for a
// caller that is not an HTTP client (the simulator): account asks for
// desired on quota quotaCode of service serviceCode in region, and the
// Policy decides at once, as for a request through the API. Its errors are
// the API's (*awsjson.Error), wrapped.
func (s *Service) RequestIncrease(ctx context.Context, account, region, serviceCode, quotaCode string, desired float64) (Request, error) {
	c, q, err := s.lookup(&quotaIn{ServiceCode: &serviceCode, QuotaCode: &quotaCode})
	if err == nil {
		err = validDesired(q, &desired)
	}
	var r Request
	if err == nil {
		r, err = s.request(ctx, c, q, awsjson.Identity{Account: account, Region: region}, desired)
	}
	if err != nil {
		return Request{}, fmt.Errorf("servicequotas: request %s %s: %w", serviceCode, quotaCode, err)
	}
	return r, nil
}

// Decide approves (StatusApproved) or denies (StatusDenied) the PENDING
// request id with reason, as an operator does through AdminHandlers; an
// approved value applies at once. It returns the request as decided.
func (s *Service) Decide(ctx context.Context, id, status, reason string) (Request, error) {
	if status != StatusApproved && status != StatusDenied {
		return Request{}, fmt.Errorf("servicequotas: decide %s: status %q (want %s or %s)", id, status, StatusApproved, StatusDenied)
	}
	r, err := s.decide(ctx, id, status, reason)
	if err != nil {
		return r, fmt.Errorf("servicequotas: decide %s: %w", id, err)
	}
	return r, nil
}

// decide is Decide without its check of status; its errors are
// errNotFound, errNotPending (with the request) and the store's. A
// request whose quota left the config is closed INVALID_REQUEST, not
// applied.
func (s *Service) decide(ctx context.Context, id, status, reason string) (Request, error) {
	if !requestIDPattern().MatchString(id) {
		return Request{}, errNotFound
	}
	r, err := s.be.get(ctx, id)
	if err != nil {
		return r, err
	}
	if r.Status != StatusPending {
		return r, errNotPending
	}
	if _, ok := s.Catalog().Quota(r.ServiceCode, r.QuotaCode); !ok && status == StatusApproved {
		status, reason = StatusInvalid, "the quota is no longer in the config"
	}
	got, err := s.be.decide(ctx, id, status, reason, s.now().UnixMilli())
	if err != nil {
		return got, err
	}
	if got.Status == StatusApproved {
		s.refreshAfter(ctx)
	}
	return got, nil
}
