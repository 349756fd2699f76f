package servicequotas

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/quota"
)

// Error codes, exactly as the model and the SDK name them.
const (
	codeAccessDenied          = "AccessDeniedException"
	codeIllegalArgument       = "IllegalArgumentException"
	codeInvalidPaginationTok  = "InvalidPaginationTokenException"
	codeNoSuchResource        = "NoSuchResourceException"
	codeQuotaExceeded         = "QuotaExceededException"
	codeResourceAlreadyExists = "ResourceAlreadyExistsException"
	codeService               = "ServiceException"
	codeNoOrganization        = "NoAvailableOrganizationException"
)

const maxBody = 64 << 10

type handler func(s *Service, ctx context.Context, id awsjson.Identity, body []byte) (any, error)

// operations are the operations the API implements.
var operations = map[string]handler{
	"ListServices":                                  (*Service).listServices,
	"ListServiceQuotas":                             (*Service).listServiceQuotas,
	"GetServiceQuota":                               (*Service).getServiceQuota,
	"ListAWSDefaultServiceQuotas":                   (*Service).listDefaultQuotas,
	"GetAWSDefaultServiceQuota":                     (*Service).getDefaultQuota,
	"RequestServiceQuotaIncrease":                   (*Service).requestIncrease,
	"GetRequestedServiceQuotaChange":                (*Service).getRequest,
	"ListRequestedServiceQuotaChangeHistory":        (*Service).listHistory,
	"ListRequestedServiceQuotaChangeHistoryByQuota": (*Service).listHistoryByQuota,
	"StartQuotaUtilizationReport":                   (*Service).startReport,
	"GetQuotaUtilizationReport":                     (*Service).getReport,
	"TagResource":                                   (*Service).tagResource,
	"UntagResource":                                 (*Service).untagResource,
	"ListTagsForResource":                           (*Service).listTags,
	"GetAutoManagementConfiguration":                (*Service).getAutoManagement,
	"StartAutoManagement":                           (*Service).startAutoManagement,
	"StopAutoManagement":                            (*Service).stopAutoManagement,
	"UpdateAutoManagement":                          (*Service).updateAutoManagement,
}

// Unsupported lists the model's operations this API does not implement
// and the error each answers with: the template operations as AWS
// answers an account outside an organization, CreateSupportCase
// AccessDenied (tollgate has no support cases).
var Unsupported = map[string]string{
	"AssociateServiceQuotaTemplate":                 codeNoOrganization,
	"DeleteServiceQuotaIncreaseRequestFromTemplate": codeNoOrganization,
	"DisassociateServiceQuotaTemplate":              codeNoOrganization,
	"GetAssociationForServiceQuotaTemplate":         codeNoOrganization,
	"GetServiceQuotaIncreaseRequestFromTemplate":    codeNoOrganization,
	"ListServiceQuotaIncreaseRequestsInTemplate":    codeNoOrganization,
	"PutServiceQuotaIncreaseRequestIntoTemplate":    codeNoOrganization,
	"CreateSupportCase":                             codeAccessDenied,
}

// ServeHTTP answers one Service Quotas API request. The gateway has
// throttled it and set awsjson.HeaderAccount; the region is the
// credential's.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		awsjson.WriteError(w, http.StatusMethodNotAllowed, awsjson.CodeUnknownOperation, "Service Quotas requests are POSTs")
		return
	}
	prefix, action, err := awsjson.ParseTarget(r.Header.Get("X-Amz-Target"))
	if err != nil || prefix != quota.ServiceQuotasTargetPrefix {
		awsjson.WriteError(w, http.StatusBadRequest, awsjson.CodeUnknownOperation, "unknown operation "+awsjson.Clip(r.Header.Get("X-Amz-Target")))
		return
	}
	id, err := awsjson.IdentityOf(r)
	if err != nil {
		awsjson.AuthError(err).Write(w)
		return
	}
	if !s.Catalog().Config().ServesRegion(id.Region) {
		// The gateway refuses it first; this keeps a handler served
		// without one from storing requests of any region a caller names.
		awsjson.RegionError(id.Region).Write(w)
		return
	}
	op, ok := operations[action]
	if !ok {
		if code, ok := Unsupported[action]; ok {
			msg := "tollgate does not implement " + action
			if code == codeNoOrganization {
				msg = "The account making this call is not a member of an organization (tollgate has no organizations)"
			}
			awsjson.WriteError(w, http.StatusBadRequest, code, msg)
			return
		}
		awsjson.WriteError(w, http.StatusBadRequest, awsjson.CodeUnknownOperation, "unknown operation "+awsjson.Clip(action))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		awsjson.WriteError(w, http.StatusBadRequest, awsjson.CodeSerialization, "request body: "+awsjson.ClipMessage(err.Error()))
		return
	}
	resp, err := op(s, r.Context(), id, body)
	if err != nil {
		var ae *awsjson.Error
		if !errors.As(err, &ae) {
			s.log.Error("service quotas store failed", "action", action, "error", err)
			awsjson.WriteError(w, http.StatusInternalServerError, codeService, "service quotas store unavailable")
			return
		}
		ae.Write(w)
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		awsjson.WriteError(w, http.StatusInternalServerError, codeService, err.Error())
		return
	}
	awsjson.WriteResult(w, b)
}

func illegal(msg string) *awsjson.Error {
	return &awsjson.Error{Status: http.StatusBadRequest, Code: codeIllegalArgument, Message: msg}
}

func noSuch(msg string) *awsjson.Error {
	return &awsjson.Error{Status: http.StatusBadRequest, Code: codeNoSuchResource, Message: msg}
}

// decode reads a request document into v; an empty body is {}.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if msg := awsjson.CheckBody(body); msg != "" {
		return &awsjson.Error{Status: http.StatusBadRequest, Code: awsjson.CodeSerialization, Message: msg}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &awsjson.Error{Status: http.StatusBadRequest, Code: awsjson.CodeSerialization, Message: te.Field + ": wrong JSON type " + te.Value}
		}
		return &awsjson.Error{Status: http.StatusBadRequest, Code: awsjson.CodeSerialization, Message: awsjson.ClipMessage(err.Error())}
	}
	return nil
}

// The patterns with bounded repetitions are compiled on first use: each
// expands to hundreds of instructions, which every tollgate process would
// otherwise build at start (0.5 ms and 268 KB of its init).
var (
	serviceCodePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]{1,63}$`) })
	quotaCodePattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]{1,128}$`) })
	requestIDPattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-zA-Z][a-zA-Z0-9-]{1,128}$`) })
	nextTokenPattern   = regexp.MustCompile(`^[a-zA-Z0-9/+]*={0,2}$`)
)

// page is the pagination of a list: MaxResults 1 to 100 (default 100) and
// an opaque NextToken, base64 of "v1:" and the offset.
type page struct {
	NextToken  *string `json:"NextToken"`
	MaxResults *int    `json:"MaxResults"`
}

func (p page) bounds(n int) (start, end int, err error) {
	limit := 100
	if p.MaxResults != nil {
		if *p.MaxResults < 1 || *p.MaxResults > 100 {
			return 0, 0, illegal("MaxResults must be between 1 and 100")
		}
		limit = *p.MaxResults
	}
	if p.NextToken != nil && *p.NextToken != "" {
		t := *p.NextToken
		bad := &awsjson.Error{Status: http.StatusBadRequest, Code: codeInvalidPaginationTok, Message: "invalid NextToken"}
		if len(t) > 2048 || !nextTokenPattern.MatchString(t) {
			return 0, 0, bad
		}
		raw, err := base64.StdEncoding.DecodeString(t)
		off, ok := strings.CutPrefix(string(raw), "v1:")
		if err != nil || !ok {
			return 0, 0, bad
		}
		start, err = strconv.Atoi(off)
		if err != nil || start < 0 || start > n {
			return 0, 0, bad
		}
	}
	return start, min(start+limit, n), nil
}

// next is the NextToken after end, or nil at the end of the list.
func next(end, n int) *string {
	if end >= n {
		return nil
	}
	t := base64.StdEncoding.EncodeToString([]byte("v1:" + strconv.Itoa(end)))
	return &t
}

func checkCodes(service, quotaCode *string, needQuota bool) error {
	if service == nil || *service == "" {
		return illegal("ServiceCode is required")
	}
	if !serviceCodePattern().MatchString(*service) {
		return illegal("ServiceCode " + awsjson.Clip(*service) + " is not a service code")
	}
	if needQuota {
		if quotaCode == nil || *quotaCode == "" {
			return illegal("QuotaCode is required")
		}
		if !quotaCodePattern().MatchString(*quotaCode) {
			return illegal("QuotaCode " + awsjson.Clip(*quotaCode) + " is not a quota code")
		}
	}
	return nil
}

func checkLevel(level *string) (accountLevel bool, err error) {
	if level == nil {
		return true, nil
	}
	switch *level {
	case "ACCOUNT", "ALL":
		return true, nil
	case "RESOURCE":
		return false, nil
	}
	return false, illegal("level must be ACCOUNT, RESOURCE or ALL")
}

func validDesired(q *Quota, v *float64) error {
	if v == nil {
		return illegal("DesiredValue is required")
	}
	d := *v
	switch {
	case math.IsNaN(d) || d < 0 || d > 1e10:
		return illegal("DesiredValue must be between 0 and 10000000000")
	case q.Kind == Burst && (d < 1 || d != math.Trunc(d)):
		return illegal("DesiredValue of a burst quota must be a whole number of at least 1")
	case q.Kind == Rate && d <= 0:
		return illegal("DesiredValue of a rate quota must be above 0")
	case q.Kind == Rate && d < 1e-6:
		return illegal("DesiredValue of a rate quota must be at least 0.000001 per second")
	}
	return nil
}
