package awsjson

import "net/http"

// HeaderAccount is the request header in which the gateway tells an API
// behind it (an in-process handler) the account a request was throttled
// as: the account the config maps the access key to. The gateway replaces
// any value a client sent.
const HeaderAccount = "X-Tollgate-Account"

// Identity is who a request is from, as an AWS API scopes its state.
type Identity struct {
	AccessKeyID string // of the SigV4 credential
	Account     string // HeaderAccount if set, else AccessKeyID
	Region      string // of the SigV4 credential
}

// IdentityOf reads a request's identity: the credential scope of its
// Authorization header and the account in [HeaderAccount], the access key
// id standing for the account when that header is absent. Errors are
// [ParseAuthorization]'s (map them with [AuthError]).
func IdentityOf(h http.Header) (Identity, error) {
	cred, err := ParseAuthorization(h.Get("Authorization"))
	if err != nil {
		return Identity{}, err
	}
	id := Identity{AccessKeyID: cred.AccessKeyID, Account: cred.AccessKeyID, Region: cred.Region}
	if a := h.Get(HeaderAccount); a != "" {
		id.Account = a
	}
	return id, nil
}
