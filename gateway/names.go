package gateway

import (
	"sync"

	"github.com/tollgate/tollgate/awsjson"
)

// maxAccountNames bounds the account ids the gateway remembers: past it,
// a 12-digit id is still shown beside its account, but a lookup by the id
// of an access key seen after the bound finds the key only by its name.
const maxAccountNames = 1 << 16

// accountNames maps the 12-digit account id that AWS answers show
// ([awsjson.AccountID]) back to the account a bucket is named by: the
// access key of a request whose key the config maps to no account. So an
// admin lookup by either name finds the same bucket.
type accountNames struct {
	mu        sync.RWMutex
	byID      map[string]string   // 12-digit id → account
	byAccount map[string]struct{} // the accounts in byID, so a known one costs no hash
}

// note remembers account's 12-digit id, once. It is on the AWS path: a
// known account costs a read lock and a map lookup, and only a new one
// hashes its id.
func (n *accountNames) note(account string) {
	n.mu.RLock()
	_, known := n.byAccount[account]
	full := len(n.byID) >= maxAccountNames
	n.mu.RUnlock()
	if known || full {
		return
	}
	id := awsjson.AccountID(account)
	if id == account {
		return // a 12-digit account is its own id
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byID == nil {
		n.byID, n.byAccount = map[string]string{}, map[string]struct{}{}
	}
	if len(n.byID) < maxAccountNames {
		n.byID[id] = account
		n.byAccount[account] = struct{}{}
	}
}

// account returns the account a name stands for: the access key whose id
// it is, or the name itself.
func (n *accountNames) account(name string) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if a, ok := n.byID[name]; ok {
		return a
	}
	return name
}
