package servicequotas

import (
	"context"
	"encoding/json"
	"net/http"
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

// value is an account's current value of q: approved, else the config's.
func (s *Service) value(c *Catalog, st *state, q *Quota, id awsjson.Identity) float64 {
	if v, ok := st.Applied[appliedKey(id.Account, id.Region, q.ServiceCode, q.Code)]; ok {
		return v
	}
	return c.configValue(q, id.Account, id.Region)
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
	st := &state{}
	if !defaults {
		if st, err = s.be.load(ctx); err != nil {
			return nil, err
		}
	}
	out := quotaList{NextToken: next(end, len(sel)), Quotas: []serviceQuota{}}
	for _, q := range sel[start:end] {
		v := q.Default
		if !defaults {
			v = s.value(c, st, q, id)
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
	st, err := s.be.load(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]serviceQuota{"Quota": s.shape(q, id, s.value(c, st, q, id))}, nil
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

// request records a request of account id for desired on q, decided by the
// policy at once: the RequestServiceQuotaIncrease operation after its input
// is checked.
func (s *Service) request(ctx context.Context, c *Catalog, q *Quota, id awsjson.Identity, desired float64) (Request, error) {
	rid := awsjson.NewRequestID()
	now := s.now().UnixMilli()
	pol := s.policy.Load()
	var made Request
	st, err := s.be.update(ctx, func(st *state) error {
		cur := s.value(c, st, q, id)
		if desired <= cur {
			return illegal("DesiredValue " + formatValue(desired) + " is not above the current value " + formatValue(cur) +
				" (ask an operator to lower a quota)")
		}
		open := 0
		for i := range st.Requests {
			r := &st.Requests[i]
			if r.Account != id.Account || r.Status != StatusPending {
				continue
			}
			if r.Region == id.Region && r.ServiceCode == q.ServiceCode && r.QuotaCode == q.Code {
				return &awsjson.Error{Status: http.StatusBadRequest, Code: codeResourceAlreadyExists,
					Message: "request " + r.ID + " for this quota is still open"}
			}
			open++
		}
		if open >= maxOpenPerAccount {
			return &awsjson.Error{Status: http.StatusBadRequest, Code: codeQuotaExceeded,
				Message: "this account has " + strconv.Itoa(open) + " open quota increase requests, the most allowed"}
		}
		status, reason := pol.decide(c.configName(q.ServiceCode), q.Category, c.configValue(q, id.Account, id.Region), desired)
		made = Request{ID: rid, Account: id.Account, Region: id.Region, ServiceCode: q.ServiceCode, QuotaCode: q.Code,
			DesiredValue: desired, Status: status, Reason: reason, Created: now, LastUpdated: now}
		st.Requests = append(st.Requests, made)
		if status == StatusApproved {
			st.Applied[appliedKey(id.Account, id.Region, q.ServiceCode, q.Code)] = desired
		}
		return nil
	})
	if err != nil {
		return Request{}, err
	}
	s.install(st)
	return made, nil
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
	st, err := s.be.load(ctx)
	if err != nil {
		return nil, err
	}
	i := st.find(*in.RequestID)
	if i < 0 || st.Requests[i].Account != id.Account {
		return nil, noSuch("no request " + awsjson.Clip(*in.RequestID))
	}
	return map[string]requestedChange{"RequestedQuota": s.change(s.Catalog(), &st.Requests[i])}, nil
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
	st, err := s.be.load(ctx)
	if err != nil {
		return nil, err
	}
	var sel []*Request
	for i := len(st.Requests) - 1; i >= 0 && accountLevel; i-- { // newest first, as AWS lists them
		r := &st.Requests[i]
		if r.Account != id.Account || r.Region != id.Region ||
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
