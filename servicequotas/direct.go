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
// errNotFound, errNotPending (with the request) and the store's.
func (s *Service) decide(ctx context.Context, id, status, reason string) (Request, error) {
	c := s.Catalog()
	now := s.now().UnixMilli()
	var got Request
	st, err := s.be.update(ctx, func(st *state) error {
		i := st.find(id)
		if i < 0 {
			return errNotFound
		}
		req := &st.Requests[i]
		if req.Status != StatusPending {
			got = *req
			return errNotPending
		}
		req.Status, req.Reason, req.LastUpdated = status, reason, now
		if status == StatusApproved {
			if _, ok := c.Quota(req.ServiceCode, req.QuotaCode); !ok {
				req.Status, req.Reason = StatusInvalid, "the quota is no longer in the config"
			} else {
				st.Applied[appliedKey(req.Account, req.Region, req.ServiceCode, req.QuotaCode)] = req.DesiredValue
			}
		}
		got = *req
		return nil
	})
	if err != nil {
		return got, err
	}
	s.install(st)
	return got, nil
}
