package awsjson

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
)

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
// signature (see [CredentialOf]) and the account in [HeaderAccount], the
// access key id standing for the account when that header is absent.
// Errors are [ParseAuthorization]'s (map them with [AuthError]).
func IdentityOf(r *http.Request) (Identity, error) {
	cred, err := CredentialOf(r)
	if err != nil {
		return Identity{}, err
	}
	id := Identity{AccessKeyID: cred.AccessKeyID, Account: cred.AccessKeyID, Region: cred.Region}
	if a := r.Header.Get(HeaderAccount); a != "" {
		id.Account = a
	}
	return id, nil
}

// AccountID is the 12-digit AWS account id that AWS answers (ARNs, a
// Requester's accountId) show for an account: the account itself when it
// is 12 digits (as the config's access_keys map keys to accounts, and as
// LocalStack takes such an access key), else 12 digits derived from its
// SHA-256. An access key the config does not map is its own account,
// named by the key where tollgate names accounts (buckets, the admin
// endpoints), and shown as this id in every AWS API's answers, the same
// in each one.
func AccountID(account string) string {
	if len(account) == 12 && strings.Trim(account, "0123456789") == "" {
		return account
	}
	h := sha256.Sum256([]byte(account))
	return fmt.Sprintf("%012d", binary.BigEndian.Uint64(h[:8])%1_000_000_000_000)
}
