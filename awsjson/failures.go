package awsjson

import (
	"hash/maphash"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// FailureBound bounds the work that requests failing authentication can
// cost, so that nobody can turn it against a tenant that signs correctly.
//
// Failures are counted per (access key id, client address): a pair that
// has spent its burst of failures (PairBurst, refilled at PairRate a
// second) is refused before its request is read or verified, and only
// that pair is: another key from the same address (a neighbour behind the
// same NAT, proxy or load balancer) and the same key from another address
// are heard as before. Access key ids the credentials do not hold count
// as one key, so made-up ids neither grow the table nor dodge the bound
// (and cost no HMAC to refuse).
//
// Verification itself is bounded by a global budget (VerifyRate a second,
// as a token bucket): a flood of failing requests from many addresses
// costs at most that much CPU. What the budget has is given out in this
// order, the request the bound knows least good of shed first:
//
//   - a proven pair (its key verified from its address within ProvenFor,
//     and it has not spent its burst of failures since) is verified
//     without drawing on the budget: a tenant that signs correctly is
//     served through any flood of others' failures;
//   - a pair whose key is clean (it has not spent its KeyBurst of failures
//     across all addresses) may draw the budget down to empty;
//   - a pair whose key is failing from many addresses may draw it only
//     down to half, so a key under attack from rotating addresses cannot
//     take the verifications of new, clean tenants.
//
// Memory is bounded: at most MaxClients pairs are tracked (pairs whose
// failures have refilled, and proofs that expired, are forgotten to make
// room; past the bound a new pair is simply not tracked, and its requests
// draw on the budget like any unknown pair's), and keys are those of the
// credentials.
//
// A FailureBound is safe for concurrent use. Its methods take the time,
// so it is tested on a fake clock.
type FailureBound struct {
	pairLimit   bucket.Limit
	keyLimit    bucket.Limit
	verifyLimit bucket.Limit
	provenFor   time.Duration
	maxClients  int

	mu         sync.Mutex
	lastForget int64 // Unix ns of the last sweep for room
	pairs      map[pairKey]pairState
	keys       map[string]bucket.State // failures per access key id (the credentials' ids, and unknownKey)
	verify     bucket.State            // the global verification budget
}

// pairKey is an access key id and a client address.
type pairKey struct{ key, addr string }

// pairState is what the bound remembers of a pair.
type pairState struct {
	failures    bucket.State // its failures' bucket
	provenUntil int64        // Unix ns until which it counts as proven; 0: never proven
}

// unknownKey stands for every access key id the credentials do not hold.
const unknownKey = "\x00unknown"

// FailureOptions configure a [FailureBound]; the zero value takes every
// default.
type FailureOptions struct {
	// PairBurst and PairRate are the failures one access key id may have
	// from one address: PairBurst at once, refilled at PairRate a second.
	// 0 means DefaultPairBurst and DefaultPairRate.
	PairBurst int64
	PairRate  float64
	// KeyBurst and KeyRate are the failures of one access key id across
	// all addresses past which its unproven pairs are verified only from
	// the upper half of the budget. 0 means DefaultKeyBurst and
	// DefaultKeyRate.
	KeyBurst int64
	KeyRate  float64
	// VerifyRate is the verifications of unproven pairs a second, all
	// clients together (and the budget's burst). 0 means
	// DefaultVerifyRate.
	VerifyRate float64
	// ProvenFor is how long a pair stays proven after it verified. 0
	// means DefaultProvenFor.
	ProvenFor time.Duration
	// MaxClients bounds the pairs tracked. 0 means DefaultFailureMaxClients.
	MaxClients int
}

// Defaults of [FailureOptions].
const (
	DefaultPairBurst         = 20
	DefaultPairRate          = 1
	DefaultKeyBurst          = 200
	DefaultKeyRate           = 20
	DefaultVerifyRate        = 10000
	DefaultProvenFor         = 10 * time.Minute
	DefaultFailureMaxClients = 65536
)

// NewFailureBound returns a bound with the options' settings.
func NewFailureBound(o FailureOptions) *FailureBound {
	pos := func(v, def float64) float64 {
		if v <= 0 {
			return def
		}
		return v
	}
	burst := func(v, def int64) int64 {
		if v <= 0 {
			return def
		}
		return v
	}
	if o.ProvenFor <= 0 {
		o.ProvenFor = DefaultProvenFor
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultFailureMaxClients
	}
	verifyRate := pos(o.VerifyRate, DefaultVerifyRate)
	return &FailureBound{
		pairLimit:   bucket.MustLimit(burst(o.PairBurst, DefaultPairBurst), pos(o.PairRate, DefaultPairRate)),
		keyLimit:    bucket.MustLimit(burst(o.KeyBurst, DefaultKeyBurst), pos(o.KeyRate, DefaultKeyRate)),
		verifyLimit: bucket.MustLimit(max(int64(verifyRate), 2), verifyRate),
		provenFor:   o.ProvenFor,
		maxClients:  o.MaxClients,
		pairs:       map[pairKey]pairState{},
		keys:        map[string]bucket.State{},
	}
}

// Admission is what the bound decides of a request before it is read.
type Admission int

// The admissions, from the most trusted.
const (
	// AdmitProven: the pair verified lately; verify it, budget or not.
	AdmitProven Admission = iota
	// AdmitBudget: verify it; it drew on the verification budget.
	AdmitBudget
	// RefuseFailing: the pair spent its failures; answer without
	// reading the request.
	RefuseFailing
	// RefuseBusy: the verification budget is spent for requests of its
	// standing; answer without reading the request.
	RefuseBusy
)

// clientOf is the address part of a RemoteAddr ("ip:port").
func clientOf(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// Admit decides a request of access key id key (as [Verifier.keyOf] maps
// it) from remote, at now.
func (f *FailureBound) Admit(key, remote string, now time.Time) Admission {
	p := pairKey{key, clientOf(remote)}
	ns := now.UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	s, tracked := f.pairs[p]
	if tracked {
		if _, d := f.pairLimit.TakeAt(s.failures, ns, 1); !d.Allowed { // a look: the state is not kept
			return RefuseFailing
		}
		if s.provenUntil > ns {
			return AdmitProven
		}
	}
	if key == unknownKey {
		return AdmitBudget // refused on a map lookup, no HMAC: nothing to budget
	}
	need := int64(1)
	if _, d := f.keyLimit.TakeAt(f.keys[key], ns, 1); !d.Allowed {
		// A failing key may use only the upper half: take what would
		// leave half, give back all but one.
		need = f.verifyLimit.Capacity()/2 + 1
	}
	next, d := f.verifyLimit.TakeAt(f.verify, ns, need)
	if !d.Allowed {
		return RefuseBusy
	}
	if need > 1 {
		next, _ = f.verifyLimit.TakeAt(f.verify, ns, 1)
	}
	f.verify = next
	return AdmitBudget
}

// prove is Note of a success: it returns until when the pair is proven,
// or 0 when it has spent its failures (and is refused all the same).
func (f *FailureBound) prove(key, remote string, now time.Time) (until int64) {
	f.Note(key, remote, true, now)
	ns := now.UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	s, tracked := f.pairs[pairKey{key, clientOf(remote)}]
	if !tracked {
		return 0
	}
	if _, d := f.pairLimit.TakeAt(s.failures, ns, 1); !d.Allowed {
		return 0
	}
	return s.provenUntil
}

// Note records the outcome of a verification of key's from remote: a
// success proves the pair, a failure counts against the pair and the key.
func (f *FailureBound) Note(key, remote string, ok bool, now time.Time) {
	p := pairKey{key, clientOf(remote)}
	ns := now.UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	s, tracked := f.pairs[p]
	if ok {
		s.provenUntil = ns + int64(f.provenFor)
	} else {
		s.failures, _ = f.pairLimit.TakeAt(s.failures, ns, 1)
		if _, d := f.pairLimit.TakeAt(s.failures, ns, 1); !d.Allowed {
			s.provenUntil = 0 // spent: proven again only by a success
		}
		f.keys[key], _ = f.keyLimit.TakeAt(f.keys[key], ns, 1)
	}
	if !tracked && len(f.pairs) >= f.maxClients {
		// A sweep for room at most once a second: a full table of live
		// entries must not make every new failure a walk of the table.
		if ns-f.lastForget < int64(time.Second) {
			return
		}
		f.lastForget = ns
		f.forget(ns)
		if len(f.pairs) >= f.maxClients {
			return
		}
	}
	f.pairs[p] = s
}

// Failing reports whether key has spent its failures from remote's
// address, or across all addresses, at now.
func (f *FailureBound) Failing(key, remote string, now time.Time) bool {
	ns := now.UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, tracked := f.pairs[pairKey{key, clientOf(remote)}]; tracked {
		if _, d := f.pairLimit.TakeAt(s.failures, ns, 1); !d.Allowed {
			return true
		}
	}
	_, d := f.keyLimit.TakeAt(f.keys[key], ns, 1)
	return !d.Allowed
}

// forget drops the pairs that say nothing a fresh entry would not:
// failures refilled and no proof in force.
func (f *FailureBound) forget(ns int64) {
	for p, s := range f.pairs {
		if int64(s.failures) <= ns && s.provenUntil <= ns {
			delete(f.pairs, p)
		}
	}
	for k, s := range f.keys {
		if int64(s) <= ns {
			delete(f.keys, k)
		}
	}
}

// Tracked is the number of pairs the bound holds (for tests and metrics).
func (f *FailureBound) Tracked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pairs)
}

// A key remembers the failure bound's last word on it: that it verified
// from an address (its addrHash) and is proven there until an instant. It
// lets a proven tenant's requests be admitted and noted without the
// bound's lock and maps (see [Verifier.AdmitSigned]); any failure of the
// key from that address drops it, so the bound decides again. The two
// words are stored apart: a reader that sees one proof's address with
// another's instant sees a key that did verify from that address lately,
// and a proof decides only the budget and the in-flight share, never
// whether a signature is checked. Addresses are compared by a 64-bit hash
// with a seed of the process's, which nobody outside can aim a collision
// at.

// addrSeed is the seed of addrHash.
var addrSeed = maphash.MakeSeed()

// addrHash is the hash of a client address a key's proof holds, never 0.
func addrHash(addr string) uint64 {
	return max(maphash.String(addrSeed, addr), 1)
}

// proofRefresh is how stale a proof may be before a success renews it in
// the bound: a proven tenant writes to the bound's table once in this
// long, not on every request.
const proofRefresh = time.Minute

// keyOf is the key a FailureBound counts an access key id under: the id
// when the credentials hold it, else unknownKey.
func (v *Verifier) keyOf(accessKeyID string) string {
	if _, ok := v.keys.Load().keys[accessKeyID]; ok {
		return accessKeyID
	}
	return unknownKey
}

// Admit decides, before a request is read, whether to hear it: nil, with
// proven reporting that its access key id verified from its address
// lately; or the error to answer with (ThrottlingException for a key and
// address that spent their failures, ServiceUnavailableException while
// the verification budget is spent for requests like it).
func (v *Verifier) Admit(accessKeyID, remote string) (proven bool, e *Error) {
	s := Signed{Cred: Credential{AccessKeyID: accessKeyID}}
	return v.AdmitSigned(&s, remote)
}

// AdmitSigned is [Verifier.Admit] for a signature [ParseSigned] read,
// which keeps what it looked up of the key for [Verifier.VerifySigned]. A
// key proven from remote's address lately is admitted from what the key
// remembers, without the failure bound's lock.
func (v *Verifier) AdmitSigned(s *Signed, remote string) (proven bool, e *Error) {
	ks, known := v.keys.Load().keys[s.Cred.AccessKeyID]
	s.key, s.keys = ks, true
	if v.failures == nil {
		return false, nil
	}
	now := v.now()
	addr := clientOf(remote)
	if known && ks.proofAddr.Load() == addrHash(addr) && ks.proofUntil.Load() > now.UnixNano() {
		return true, nil
	}
	id := unknownKey
	if known {
		id = s.Cred.AccessKeyID
	}
	switch v.failures.Admit(id, remote, now) {
	case AdmitProven:
		return true, nil
	case RefuseFailing:
		return false, &Error{http.StatusBadRequest, "ThrottlingException",
			"Rate exceeded: too many requests with this access key id failed authentication from this address; retry later"}
	case RefuseBusy:
		return false, &Error{http.StatusServiceUnavailable, "ServiceUnavailableException",
			"too many requests are being verified; retry later"}
	}
	return false, nil
}

// Failing reports whether access key id accessKeyID (the credentials'
// ids each, every other id as one) has spent its failures from remote's
// address or across addresses: a refusal of it can wait longer.
func (v *Verifier) Failing(accessKeyID, remote string) bool {
	return v.failures != nil && v.failures.Failing(v.keyOf(accessKeyID), remote, v.now())
}

// noteOutcome tells the failure bound how r's verification went; id is
// the access key id it verified as (read from r again when it failed).
func (v *Verifier) noteOutcome(r *http.Request, id, remote string, ok bool) {
	if v.failures == nil {
		return
	}
	if !ok {
		if cred, err := CredentialOf(r); err == nil {
			id = cred.AccessKeyID
		}
	}
	v.note(id, remote, ok)
}

// note tells the failure bound how a verification of access key id from
// remote went.
func (v *Verifier) note(id, remote string, ok bool) {
	if v.failures == nil {
		return
	}
	ks, known := v.keys.Load().keys[id]
	if !known {
		v.failures.Note(unknownKey, remote, ok, v.now())
		return
	}
	if ok {
		v.noteSuccess(ks, id, remote)
		return
	}
	ks.proofAddr.CompareAndSwap(addrHash(clientOf(remote)), 0)
	v.failures.Note(id, remote, false, v.now())
}

// noteSuccess records that key ks (of access key id id) verified from
// remote: in the failure bound once a proofRefresh, and in the key's proof.
func (v *Verifier) noteSuccess(ks *keyState, id, remote string) {
	if v.failures == nil {
		return
	}
	now := v.now()
	ns := now.UnixNano()
	h := addrHash(clientOf(remote))
	if ks.proofAddr.Load() == h && ks.proofUntil.Load()-int64(v.failures.provenFor) > ns-int64(proofRefresh) {
		return // renewed lately
	}
	if until := v.failures.prove(id, remote, now); until > 0 {
		ks.proofUntil.Store(until)
		ks.proofAddr.Store(h)
	}
}
