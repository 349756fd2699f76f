package servicequotas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tollgate/tollgate/awsjson"
)

// serviceQuota is the model's ServiceQuota shape.
type serviceQuota struct {
	ServiceCode         string      `json:"ServiceCode"`
	ServiceName         string      `json:"ServiceName"`
	QuotaArn            string      `json:"QuotaArn"`
	QuotaCode           string      `json:"QuotaCode"`
	QuotaName           string      `json:"QuotaName"`
	Value               float64     `json:"Value"`
	Unit                string      `json:"Unit"`
	Adjustable          bool        `json:"Adjustable"`
	GlobalQuota         bool        `json:"GlobalQuota"`
	UsageMetric         *metricInfo `json:"UsageMetric,omitempty"`
	Period              *period     `json:"Period,omitempty"`
	QuotaAppliedAtLevel string      `json:"QuotaAppliedAtLevel"`
	Description         string      `json:"Description"`
}

type metricInfo struct {
	MetricNamespace               string            `json:"MetricNamespace"`
	MetricName                    string            `json:"MetricName"`
	MetricDimensions              map[string]string `json:"MetricDimensions"`
	MetricStatisticRecommendation string            `json:"MetricStatisticRecommendation"`
}

type period struct {
	PeriodValue int    `json:"PeriodValue"`
	PeriodUnit  string `json:"PeriodUnit"`
}

// requestedChange is the model's RequestedServiceQuotaChange shape.
type requestedChange struct {
	ID                    string      `json:"Id"`
	ServiceCode           string      `json:"ServiceCode"`
	ServiceName           string      `json:"ServiceName"`
	QuotaCode             string      `json:"QuotaCode"`
	QuotaName             string      `json:"QuotaName"`
	DesiredValue          float64     `json:"DesiredValue"`
	Status                string      `json:"Status"`
	Created               json.Number `json:"Created"`
	LastUpdated           json.Number `json:"LastUpdated"`
	Requester             string      `json:"Requester"`
	QuotaArn              string      `json:"QuotaArn"`
	GlobalQuota           bool        `json:"GlobalQuota"`
	Unit                  string      `json:"Unit"`
	QuotaRequestedAtLevel string      `json:"QuotaRequestedAtLevel"`
}

func epoch(ms int64) json.Number {
	return json.Number(strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64))
}

// quotaArn is the ARN of an account's quota; the account is shown as
// its AWS account id, as in every AWS API's answers.
func quotaArn(region, account, serviceCode, quotaCode string) string {
	return "arn:aws:servicequotas:" + region + ":" + awsjson.AccountID(account) + ":" + serviceCode + "/" + quotaCode
}

func (s *Service) shape(q *Quota, id awsjson.Identity, value float64) serviceQuota {
	out := serviceQuota{ServiceCode: q.ServiceCode, ServiceName: q.ServiceName, QuotaArn: quotaArn(id.Region, id.Account, q.ServiceCode, q.Code),
		QuotaCode: q.Code, QuotaName: q.Name, Value: value, Unit: "None", Adjustable: true,
		QuotaAppliedAtLevel: "ACCOUNT", Description: q.Description,
		UsageMetric: &metricInfo{MetricNamespace: "AWS/Usage", MetricName: "CallCount",
			MetricDimensions:              map[string]string{"Service": q.ServiceCode, "Type": "API", "Resource": q.Category, "Class": "None"},
			MetricStatisticRecommendation: "Maximum"}}
	if q.Kind == Rate {
		out.Period = &period{PeriodValue: 1, PeriodUnit: "SECOND"}
	}
	return out
}

// value is an account's current value of q: approved (in vals, as
// values read them), else the config's.
func (s *Service) value(c *Catalog, vals map[string]float64, q *Quota, id awsjson.Identity) float64 {
	if v, ok := vals[appliedKey(id.Account, id.Region, q.ServiceCode, q.Code)]; ok {
		return v
	}
	return c.configValue(q, id.Account, id.Region)
}

// values reads the applied values of an account's quotas qs from the
// store, for value.
func (s *Service) values(ctx context.Context, id awsjson.Identity, qs []*Quota) (map[string]float64, error) {
	keys := make([]string, len(qs))
	for i, q := range qs {
		keys[i] = appliedKey(id.Account, id.Region, q.ServiceCode, q.Code)
	}
	return s.be.values(ctx, keys)
}

func (s *Service) change(c *Catalog, r *Request) requestedChange {
	out := requestedChange{ID: r.ID, ServiceCode: r.ServiceCode, QuotaCode: r.QuotaCode, DesiredValue: r.DesiredValue,
		Status: r.Status, Created: epoch(r.Created), LastUpdated: epoch(r.LastUpdated),
		Requester: `{"accountId":"` + awsjson.AccountID(r.Account) + `"}`, Unit: "None", QuotaRequestedAtLevel: "ACCOUNT",
		QuotaArn: quotaArn(r.Region, r.Account, r.ServiceCode, r.QuotaCode)}
	if q, ok := c.Quota(r.ServiceCode, r.QuotaCode); ok {
		out.ServiceName, out.QuotaName = q.ServiceName, q.Name
	} else {
		out.ServiceName, out.QuotaName = r.ServiceCode, r.QuotaCode
	}
	return out
}

type serviceInfo struct {
	ServiceCode string `json:"ServiceCode"`
	ServiceName string `json:"ServiceName"`
}

func (s *Service) listServices(_ context.Context, _ awsjson.Identity, body []byte) (any, error) {
	var in page
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	svcs := s.Catalog().Services()
	start, end, err := in.bounds(len(svcs))
	if err != nil {
		return nil, err
	}
	out := struct {
		NextToken *string       `json:"NextToken,omitempty"`
		Services  []serviceInfo `json:"Services"`
	}{NextToken: next(end, len(svcs)), Services: []serviceInfo{}}
	for _, sv := range svcs[start:end] {
		out.Services = append(out.Services, serviceInfo{sv.Code, sv.Name})
	}
	return out, nil
}

type quotaListIn struct {
	page
	ServiceCode         *string `json:"ServiceCode"`
	QuotaCode           *string `json:"QuotaCode"`
	QuotaAppliedAtLevel *string `json:"QuotaAppliedAtLevel"`
}

type quotaList struct {
	NextToken *string        `json:"NextToken,omitempty"`
	Quotas    []serviceQuota `json:"Quotas"`
}

func (s *Service) list(ctx context.Context, id awsjson.Identity, body []byte, defaults bool) (any, error) {
	var in quotaListIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkCodes(in.ServiceCode, in.QuotaCode, false); err != nil {
		return nil, err
	}
	accountLevel, err := checkLevel(in.QuotaAppliedAtLevel)
	if err != nil {
		return nil, err
	}
	c := s.Catalog()
	qs, ok := c.Quotas(*in.ServiceCode)
	if !ok {
		return nil, noSuch("no service " + awsjson.Clip(*in.ServiceCode))
	}
	var sel []*Quota
	for i := range qs {
		if accountLevel && (in.QuotaCode == nil || *in.QuotaCode == "" || *in.QuotaCode == qs[i].Code) {
			sel = append(sel, &qs[i])
		}
	}
	start, end, err := in.bounds(len(sel))
	if err != nil {
		return nil, err
	}
	var vals map[string]float64
	if !defaults {
		if vals, err = s.values(ctx, id, sel[start:end]); err != nil {
			return nil, err
		}
	}
	out := quotaList{NextToken: next(end, len(sel)), Quotas: []serviceQuota{}}
	for _, q := range sel[start:end] {
		v := q.Default
		if !defaults {
			v = s.value(c, vals, q, id)
		}
		out.Quotas = append(out.Quotas, s.shape(q, id, v))
	}
	return out, nil
}

func (s *Service) listServiceQuotas(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	return s.list(ctx, id, body, false)
}

func (s *Service) listDefaultQuotas(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	return s.list(ctx, id, body, true)
}

type quotaIn struct {
	ServiceCode *string `json:"ServiceCode"`
	QuotaCode   *string `json:"QuotaCode"`
	ContextID   *string `json:"ContextId"`
}

func (s *Service) lookup(in *quotaIn) (*Catalog, *Quota, error) {
	if err := checkCodes(in.ServiceCode, in.QuotaCode, true); err != nil {
		return nil, nil, err
	}
	c := s.Catalog()
	if _, ok := c.Quotas(*in.ServiceCode); !ok {
		return nil, nil, noSuch("no service " + awsjson.Clip(*in.ServiceCode))
	}
	q, ok := c.Quota(*in.ServiceCode, *in.QuotaCode)
	if !ok {
		return nil, nil, noSuch("no quota " + awsjson.Clip(*in.QuotaCode) + " of service " + *in.ServiceCode)
	}
	if in.ContextID != nil && *in.ContextID != "" {
		return nil, nil, illegal("tollgate's quotas apply to accounts, not resources: ContextId is not supported")
	}
	return c, q, nil
}

func (s *Service) getServiceQuota(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in quotaIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	c, q, err := s.lookup(&in)
	if err != nil {
		return nil, err
	}
	vals, err := s.values(ctx, id, []*Quota{q})
	if err != nil {
		return nil, err
	}
	return map[string]serviceQuota{"Quota": s.shape(q, id, s.value(c, vals, q, id))}, nil
}

func (s *Service) getDefaultQuota(_ context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in quotaIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	in.ContextID = nil // not in this operation's input
	_, q, err := s.lookup(&in)
	if err != nil {
		return nil, err
	}
	return map[string]serviceQuota{"Quota": s.shape(q, id, q.Default)}, nil
}

func (s *Service) requestIncrease(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in struct {
		quotaIn
		DesiredValue       *float64 `json:"DesiredValue"`
		SupportCaseAllowed *bool    `json:"SupportCaseAllowed"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	c, q, err := s.lookup(&in.quotaIn)
	if err != nil {
		return nil, err
	}
	if err := validDesired(q, in.DesiredValue); err != nil {
		return nil, err
	}
	made, err := s.request(ctx, c, q, id, *in.DesiredValue)
	if err != nil {
		return nil, err
	}
	return map[string]requestedChange{"RequestedQuota": s.change(c, &made)}, nil
}

// maxCreateRetries bounds how often request decides again because the
// account's value changed while it decided.
const maxCreateRetries = 20

// request records a request of account id for desired on q, decided by the
// policy at once: the RequestServiceQuotaIncrease operation after its input
// is checked. An account is unmapped when id has an access key the
// config does not map (a caller in Go, with no key, is trusted).
func (s *Service) request(ctx context.Context, c *Catalog, q *Quota, id awsjson.Identity, desired float64) (Request, error) {
	rid := awsjson.NewRequestID()
	now := s.now().UnixMilli()
	pol := s.policy.Load()
	unmapped := id.AccessKeyID != "" && !c.cfg.MapsKey(id.AccessKeyID)
	key := appliedKey(id.Account, id.Region, q.ServiceCode, q.Code)
	for range maxCreateRetries {
		vals, err := s.be.values(ctx, []string{key})
		if err != nil {
			return Request{}, err
		}
		v, set := vals[key]
		cur := s.value(c, vals, q, id)
		if desired <= cur {
			return Request{}, illegal("DesiredValue " + formatValue(desired) + " is not above the current value " + formatValue(cur) +
				" (ask an operator to lower a quota)")
		}
		status, reason := pol.decide(c.configName(q.ServiceCode), q, c.configValue(q, id.Account, id.Region), desired)
		made := Request{ID: rid, Account: id.Account, Region: id.Region, ServiceCode: q.ServiceCode, QuotaCode: q.Code,
			DesiredValue: desired, Status: status, Reason: reason, Created: now, LastUpdated: now, Unmapped: unmapped}
		err = s.be.create(ctx, made, expect{value: v, set: set})
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return Request{}, err
		}
		if status == StatusApproved {
			s.refreshAfter(ctx)
		}
		return made, nil
	}
	return Request{}, fmt.Errorf("servicequotas: the value of %s changed %d times while a request was decided", key, maxCreateRetries)
}

func (s *Service) getRequest(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in struct {
		RequestID *string `json:"RequestId"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.RequestID == nil || !requestIDPattern().MatchString(*in.RequestID) {
		return nil, illegal("RequestId is required and must be a request id")
	}
	r, err := s.be.get(ctx, *in.RequestID)
	if errors.Is(err, errNotFound) || err == nil && r.Account != id.Account {
		return nil, noSuch("no request " + awsjson.Clip(*in.RequestID))
	}
	if err != nil {
		return nil, err
	}
	return map[string]requestedChange{"RequestedQuota": s.change(s.Catalog(), &r)}, nil
}

type historyIn struct {
	page
	ServiceCode           *string `json:"ServiceCode"`
	QuotaCode             *string `json:"QuotaCode"`
	Status                *string `json:"Status"`
	QuotaRequestedAtLevel *string `json:"QuotaRequestedAtLevel"`
}

var statuses = map[string]bool{StatusPending: true, statusCaseOpened: true, StatusApproved: true, StatusDenied: true,
	StatusCaseClosed: true, StatusNotApproved: true, StatusInvalid: true}

func (s *Service) history(ctx context.Context, id awsjson.Identity, body []byte, byQuota bool) (any, error) {
	var in historyIn
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if byQuota || in.ServiceCode != nil {
		if err := checkCodes(in.ServiceCode, in.QuotaCode, byQuota); err != nil {
			return nil, err
		}
	}
	if in.Status != nil && !statuses[*in.Status] {
		return nil, illegal("Status " + awsjson.Clip(*in.Status) + " is not a request status")
	}
	accountLevel, err := checkLevel(in.QuotaRequestedAtLevel)
	if err != nil {
		return nil, err
	}
	c := s.Catalog()
	if in.ServiceCode != nil {
		if _, ok := c.Quotas(*in.ServiceCode); !ok {
			return nil, noSuch("no service " + awsjson.Clip(*in.ServiceCode))
		}
	}
	if byQuota {
		if _, ok := c.Quota(*in.ServiceCode, *in.QuotaCode); !ok {
			return nil, noSuch("no quota " + awsjson.Clip(*in.QuotaCode) + " of service " + *in.ServiceCode)
		}
	}
	var all []Request
	if accountLevel {
		if all, err = s.be.account(ctx, id.Account); err != nil {
			return nil, err
		}
	}
	var sel []*Request
	for i := range all { // newest first, as AWS lists them
		r := &all[i]
		if r.Region != id.Region ||
			in.ServiceCode != nil && r.ServiceCode != *in.ServiceCode ||
			byQuota && r.QuotaCode != *in.QuotaCode ||
			in.Status != nil && r.Status != *in.Status {
			continue
		}
		sel = append(sel, r)
	}
	start, end, err := in.bounds(len(sel))
	if err != nil {
		return nil, err
	}
	out := struct {
		NextToken       *string           `json:"NextToken,omitempty"`
		RequestedQuotas []requestedChange `json:"RequestedQuotas"`
	}{NextToken: next(end, len(sel)), RequestedQuotas: []requestedChange{}}
	for _, r := range sel[start:end] {
		out.RequestedQuotas = append(out.RequestedQuotas, s.change(c, r))
	}
	return out, nil
}

func (s *Service) listHistory(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	return s.history(ctx, id, body, false)
}

func (s *Service) listHistoryByQuota(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	return s.history(ctx, id, body, true)
}
