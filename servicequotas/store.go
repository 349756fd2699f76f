package servicequotas

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/awsjson"
)

// Request statuses, as the model names them (RequestStatus).
const (
	StatusPending     = "PENDING"
	StatusApproved    = "APPROVED"
	StatusDenied      = "DENIED"
	StatusNotApproved = "NOT_APPROVED"
	StatusCaseClosed  = "CASE_CLOSED"
	StatusInvalid     = "INVALID_REQUEST"
	statusCaseOpened  = "CASE_OPENED"
)

// What the store keeps, so that its memory is bounded by the accounts the
// config names and not by the access keys callers make up. An account is
// mapped when its request was signed with an access key the config's
// access_keys maps; any other key is its own unmapped account, and those
// share one budget.
const (
	// MaxOpenPerAccount is how many PENDING requests one account may
	// have; one more is QuotaExceededException.
	MaxOpenPerAccount = 20
	// MaxClosedPerAccount is how many closed (decided) requests of one
	// account are kept: beyond it, that account's request closed longest
	// ago is forgotten, never another account's.
	MaxClosedPerAccount = 500
	// MaxOpenUnmapped is how many PENDING requests all unmapped accounts
	// together may have; one more, from any unmapped key, is
	// QuotaExceededException at once.
	MaxOpenUnmapped = 1000
	// MaxClosedUnmapped is how many closed requests of unmapped accounts
	// are kept together: beyond it the unmapped request closed longest
	// ago is forgotten. Mapped accounts' requests are never counted here.
	MaxClosedUnmapped = 5000
	// MaxAppliedUnmapped is how many approved values unmapped accounts
	// may hold together; a request that would be approved automatically
	// and add one more is QuotaExceededException. An operator's values
	// (the admin endpoints) do not count.
	MaxAppliedUnmapped = 1000
)

// Request is one quota change request.
type Request struct {
	ID           string  `json:"id"`
	Account      string  `json:"account"`
	Region       string  `json:"region"`
	ServiceCode  string  `json:"service"`
	QuotaCode    string  `json:"quota"`
	DesiredValue float64 `json:"desired"`
	Status       string  `json:"status"`
	Reason       string  `json:"reason,omitempty"` // why it was approved or denied
	Created      int64   `json:"created"`          // Unix milliseconds
	LastUpdated  int64   `json:"updated"`          // Unix milliseconds
	// Unmapped is true when the request was signed with an access key
	// the config does not map to an account.
	Unmapped bool `json:"unmapped,omitempty"`

	seq    int64 // the store's order of creation, newest highest
	closed int64 // the store's order of closing (the same counter), 0 while open
}

// appliedKey names one applied value: a quota of one account in one region.
func appliedKey(account, region, serviceCode, quotaCode string) string {
	return account + "|" + region + "|" + serviceCode + "|" + quotaCode
}

// openKey names a request's quota within its account.
func (r *Request) openKey() string { return r.Region + "|" + r.ServiceCode + "|" + r.QuotaCode }

// applied is the request's appliedKey.
func (r *Request) applied() string {
	return appliedKey(r.Account, r.Region, r.ServiceCode, r.QuotaCode)
}

// expect is the applied value a new request was decided against: the
// store refuses the request with errRetry if it changed meanwhile.
type expect struct {
	value float64
	set   bool
}

// pageFilter selects the admin listing's requests, newest first.
type pageFilter struct {
	account  string          // "" every account
	statuses map[string]bool // nil every status
	before   int64           // only requests with a seq below it; 0 from the newest
	limit    int
}

// Errors of the backends: create's refusals are *awsjson.Error.
var (
	errRetry      = errors.New("the applied value changed; decide again")
	errNotFound   = errors.New("not found")
	errNotPending = errors.New("not pending")
)

// backend keeps requests and applied values: in memory, or in Redis shared
// by every node. Each write touches only its own request, its account's
// index and the shared counters, never other accounts' requests.
type backend interface {
	// create stores r (PENDING, or already closed by the policy; an
	// APPROVED r applies its value) if the account's applied value is
	// still e, r's quota has no open request of the account, and the
	// open and applied bounds allow it; errRetry if the value changed.
	create(ctx context.Context, r Request, e expect) error
	// decide closes the PENDING request id with status and reason at
	// now, applying its value when status is APPROVED; errNotFound, or
	// errNotPending with the request as it is.
	decide(ctx context.Context, id, status, reason string, now int64) (Request, error)
	// get returns one request, or errNotFound.
	get(ctx context.Context, id string) (Request, error)
	// account returns an account's requests, newest first.
	account(ctx context.Context, account string) ([]Request, error)
	// page returns the requests f selects, newest first, and the before
	// of the next page (0 when this is the last).
	page(ctx context.Context, f pageFilter) ([]Request, int64, error)
	// values returns the applied values of keys; absent keys are not in
	// the map.
	values(ctx context.Context, keys []string) (map[string]float64, error)
	// applied returns every applied value and the version they have.
	applied(ctx context.Context) (int64, map[string]float64, error)
	// version is the applied values' version, cheap to poll: it changes
	// whenever a value does.
	version(ctx context.Context) (int64, error)
	// set sets an applied value, or removes it when value is 0.
	set(ctx context.Context, key string, value float64) error
	// tags returns a quota ARN's tags.
	tags(ctx context.Context, res tagRes) (map[string]string, error)
	// tag adds or replaces tags on a quota ARN, all or none: none when
	// it would have more than MaxTagsPerQuota, or when it has none yet
	// and its account already tags MaxTaggedPerAccount ARNs (or, for an
	// unmapped one, unmapped accounts MaxTaggedUnmapped together).
	tag(ctx context.Context, res tagRes, tags map[string]string) error
	// untag removes the tags keys names; absent keys are no error.
	untag(ctx context.Context, res tagRes, keys []string) error
}

// The refusals of create, the same from both backends.
func errOpenExists(id string) error {
	return &awsjson.Error{Status: http.StatusBadRequest, Code: codeResourceAlreadyExists,
		Message: "request " + id + " for this quota is still open"}
}

func errTooManyOpen(n int) error {
	return &awsjson.Error{Status: http.StatusBadRequest, Code: codeQuotaExceeded,
		Message: "this account has " + strconv.Itoa(n) + " open quota increase requests, the most allowed"}
}

func errUnmappedBudget() error {
	return &awsjson.Error{Status: http.StatusBadRequest, Code: codeQuotaExceeded,
		Message: "access keys the config does not map to an account have " + strconv.Itoa(MaxOpenUnmapped) +
			" open quota increase requests together, the most allowed; ask the operator to map your access key"}
}

func errUnmappedApplied() error {
	return &awsjson.Error{Status: http.StatusBadRequest, Code: codeQuotaExceeded,
		Message: "access keys the config does not map to an account hold " + strconv.Itoa(MaxAppliedUnmapped) +
			" approved values together, the most allowed; ask the operator to map your access key"}
}
