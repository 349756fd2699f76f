package servicequotas

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/awsjson"
)

// BucketUse is how close one of an account's buckets ran to its limit
// over the last hour, as the gateway saw its decisions (Options.Usage).
type BucketUse struct {
	Service, Category string // the config's names
	// Throttled reports that the bucket throttled at least one request.
	Throttled bool
	// Peak is the most of the bucket's capacity in use after an allowed
	// decision, from 0 to 1.
	Peak float64
}

// reportTTL is how long a utilization report can be read, as AWS keeps
// them.
const reportTTL = 15 * time.Minute

// reportID names a utilization report: when it was started and a digest
// of who started it, so that any node can answer for it without storing
// it, and no account can read another's.
func reportID(account, region string, at time.Time) string {
	sec := strconv.FormatInt(at.Unix(), 16)
	sum := sha256.Sum256([]byte("tollgate/report/" + account + "/" + region + "/" + sec))
	return "qur-" + sec + "-" + hex.EncodeToString(sum[:6])
}

// reportStart parses a report id made for account and region.
func reportStart(id, account, region string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(id, "qur-")
	sec, _, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 || len(sec) > 16 {
		return time.Time{}, false
	}
	v, err := strconv.ParseInt(sec, 16, 64)
	if err != nil || v < 0 {
		return time.Time{}, false
	}
	at := time.Unix(v, 0)
	return at, reportID(account, region, at) == id
}

func (s *Service) startReport(_ context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in struct{}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	return struct {
		ReportID string `json:"ReportId"`
		Status   string `json:"Status"`
		Message  string `json:"Message"`
	}{reportID(id.Account, id.Region, s.now()), "PENDING",
		"GetQuotaUtilizationReport computes it from the last hour of this tollgate's throttling decisions"}, nil
}

// utilization is the model's QuotaUtilizationInfo.
type utilization struct {
	QuotaCode    string  `json:"QuotaCode"`
	ServiceCode  string  `json:"ServiceCode"`
	QuotaName    string  `json:"QuotaName"`
	Namespace    string  `json:"Namespace"`
	Utilization  float64 `json:"Utilization"`
	DefaultValue float64 `json:"DefaultValue"`
	AppliedValue float64 `json:"AppliedValue"`
	ServiceName  string  `json:"ServiceName"`
	Adjustable   bool    `json:"Adjustable"`
}

// getReport answers a utilization report: every quota of the account in
// the credential's region whose bucket was used in the last hour, most
// used first. Both quotas of a category measure the same token bucket, so
// both report its peak use: the share of its burst in use after an
// allowed request, or 100 once it throttled (the sustained rate outran
// the refill until the burst ran out). A report lives 15 minutes; it is
// computed when read, so each page reflects the decisions up to then.
func (s *Service) getReport(ctx context.Context, id awsjson.Identity, body []byte) (any, error) {
	var in struct {
		ReportID   *string `json:"ReportId"`
		NextToken  *string `json:"NextToken"`
		MaxResults *int    `json:"MaxResults"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.ReportID == nil || !requestIDPattern().MatchString(*in.ReportID) {
		return nil, illegal("ReportId is required and must be a report id")
	}
	at, ok := reportStart(*in.ReportID, id.Account, id.Region)
	now := s.now()
	if !ok || now.Sub(at) > reportTTL || at.After(now.Add(time.Minute)) {
		return nil, noSuch("no utilization report " + awsjson.Clip(*in.ReportID) + " (reports are kept 15 minutes)")
	}
	limit := 1000
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 1000 {
			return nil, illegal("MaxResults must be between 1 and 1000")
		}
		limit = *in.MaxResults
	}
	one := 100
	pg := page{NextToken: in.NextToken, MaxResults: &one}
	c := s.Catalog()
	var rows []utilization
	if s.usage != nil {
		var all []*Quota
		for _, sv := range c.Services() {
			qs, _ := c.Quotas(sv.Code)
			for i := range qs {
				all = append(all, &qs[i])
			}
		}
		vals, err := s.values(ctx, id, all)
		if err != nil {
			return nil, err
		}
		use := map[[2]string]BucketUse{}
		for _, u := range s.usage(id.Account, id.Region) {
			use[[2]string{u.Service, u.Category}] = u
		}
		for _, sv := range c.Services() {
			qs, _ := c.Quotas(sv.Code)
			for i := range qs {
				q := &qs[i]
				u, ok := use[[2]string{sv.Config, q.Category}]
				if !ok || (!u.Throttled && u.Peak <= 0) {
					continue
				}
				pct := 100.0
				if !u.Throttled {
					pct = math.Round(u.Peak*1000) / 10
				}
				rows = append(rows, utilization{QuotaCode: q.Code, ServiceCode: q.ServiceCode, QuotaName: q.Name, Namespace: "AWS/Usage",
					Utilization: pct, DefaultValue: q.Default, AppliedValue: s.value(c, vals, q, id), ServiceName: q.ServiceName, Adjustable: true})
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b utilization) int { return cmp.Compare(b.Utilization, a.Utilization) })
	start, _, err := pg.bounds(len(rows))
	if err != nil {
		return nil, err
	}
	end := min(start+limit, len(rows))
	return struct {
		ReportID    string        `json:"ReportId"`
		Status      string        `json:"Status"`
		GeneratedAt json.Number   `json:"GeneratedAt"`
		TotalCount  int           `json:"TotalCount"`
		Quotas      []utilization `json:"Quotas"`
		NextToken   *string       `json:"NextToken,omitempty"`
	}{*in.ReportID, "COMPLETED", epoch(now.UnixMilli()), len(rows), append([]utilization{}, rows[start:end]...), next(end, len(rows))}, nil
}
