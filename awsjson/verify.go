package awsjson

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// AWS's error codes and messages for a request that fails authentication,
// as the AWS JSON services answer them (HTTP 400 each).
const (
	CodeUnrecognizedClient = "UnrecognizedClientException"
	CodeInvalidSignature   = "InvalidSignatureException"
	// CodeAccessDenied answers (with 403) an X-Amz-* header the
	// signature does not cover.
	CodeAccessDenied = "AccessDeniedException"

	msgUnrecognizedClient = "The security token included in the request is invalid."
	msgInvalidSignature   = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	msgMissingAuth        = "Missing Authentication Token"
)

// MaxSkew is how far a request's signing time may be from the server's
// clock, either way, as AWS allows.
const MaxSkew = 5 * time.Minute

// maxPresignExpiry is the longest X-Amz-Expires AWS accepts: 7 days.
const maxPresignExpiry = 7 * 24 * time.Hour

const (
	amzDateFormat    = "20060102T150405Z"
	headerAmzDate    = "X-Amz-Date"
	headerContentSHA = "X-Amz-Content-Sha256"
	headerToken      = "X-Amz-Security-Token"
	querySignature   = "X-Amz-Signature"
)

// Verifier verifies AWS Signature Version 4 on requests, in the
// Authorization header or in a presigned URL's query, against the access
// keys of a [Credentials]. The signature is computed over exactly the
// headers the client listed in SignedHeaders (User-Agent included), by
// the canonicalisation of canonical.go, which follows aws-sdk-go-v2's
// signer byte for byte (FuzzCanonicalMatchesTheSDK) and botocore's
// (TestBotocoreVectors); a signing key is derived once per access key,
// day, region and service. Signatures are compared in constant time.
//
// AWS's rules apply: every X-Amz-* header of the request must be signed,
// a long-term key (no session token in the credentials file) must come
// without X-Amz-Security-Token and a temporary one with its own, and the
// signing time must be within [MaxSkew] of the server's clock.
//
// A Verifier is safe for concurrent use; [Verifier.SetCredentials]
// replaces the keys while requests are verified.
type Verifier struct {
	keys     atomic.Pointer[verifierKeys]
	now      func() time.Time
	failures *FailureBound
}

// verifierKeys are one Credentials with the signing keys derived from
// them.
type verifierKeys struct {
	creds *Credentials
	keys  map[string]*keyState // by access key id
}

// keyState is an access key's secret and its recent signing keys.
type keyState struct {
	signing signingKeys // first: read on every request
	// proofAddr and proofUntil are the failure bound's last proof of the
	// key (see proof): beside the signing keys, in the cache line the
	// key's lookup reads anyway.
	proofAddr  atomic.Uint64 // addrHash of the address; 0: none
	proofUntil atomic.Int64  // Unix ns
	secret     Secret
}

// VerifierOptions tune a [Verifier]. The zero value is AWS's behaviour.
type VerifierOptions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Failures bounds failed attempts per client; nil means none.
	Failures *FailureBound
}

// NewVerifier returns a Verifier of the keys in c.
func NewVerifier(c *Credentials, opts VerifierOptions) *Verifier {
	v := &Verifier{now: opts.Now, failures: opts.Failures}
	if v.now == nil {
		v.now = time.Now
	}
	v.SetCredentials(c)
	return v
}

// SetCredentials replaces the accepted keys (a re-read credentials file).
// The signing keys derived from the old ones are forgotten.
func (v *Verifier) SetCredentials(c *Credentials) {
	k := &verifierKeys{creds: c, keys: make(map[string]*keyState, len(c.keys))}
	for id, secret := range c.keys {
		k.keys[id] = &keyState{secret: secret}
	}
	v.keys.Store(k)
}

// Credentials returns the keys in use.
func (v *Verifier) Credentials() *Credentials { return v.keys.Load().creds }

// Verify checks r's signature over body and returns the credential scope
// it verified: [Verifier.VerifyHeaders] then [Verifier.VerifyBody]. The
// error is the one AWS answers with: a missing signature
// MissingAuthenticationTokenException, a malformed one
// IncompleteSignatureException, an unknown key or a wrong session token
// UnrecognizedClientException, a wrong signature, a body changed after
// signing or a time out of [MaxSkew] InvalidSignatureException, an
// unsigned X-Amz-* header AccessDeniedException. The outcome is told to
// the failure bound (see [Verifier.Admit]) under the request's access key
// id and remote, the client's address.
func (v *Verifier) Verify(r *http.Request, body []byte, remote string) (Credential, *Error) {
	p, e := v.VerifyHeaders(r, remote)
	if e != nil {
		return Credential{}, e
	}
	return v.VerifyBody(r, p, body, remote)
}

// Pending is a request whose signature [Verifier.VerifyHeaders] checked
// as far as its headers allow; [Verifier.VerifyBody] finishes it.
type Pending struct {
	// Cred is the credential scope of the signature.
	Cred Credential
	auth requestAuth
	key  *keyState
	// payload is set when the signature is verified already, over the
	// payload hash the request declared (X-Amz-Content-Sha256): the body
	// only has to hash to it.
	payload *payloadCheck
}

// VerifyHeaders checks what of r's signature can be checked before its
// body is read: its shape, its access key and session token, its time,
// that every X-Amz-* header is signed and, when the request declares its
// payload's hash (X-Amz-Content-Sha256), the signature itself; then only
// the body's hash is left, which [Pending.Body] checks as the body is
// read. Errors are [Verifier.Verify]'s, and counted against remote.
func (v *Verifier) VerifyHeaders(r *http.Request, remote string) (Pending, *Error) {
	s, e := ParseSigned(r)
	if e != nil {
		v.noteOutcome(r, "", remote, false)
		return Pending{}, e
	}
	return v.VerifySigned(r, s, remote)
}

// Signed is a request's signature as [ParseSigned] read it, not yet
// checked.
type Signed struct {
	// Cred is the credential scope the request claims.
	Cred Credential
	auth requestAuth
	key  *keyState // the key's, once looked up (keys); nil: not in the credentials
	keys bool
}

// ParseSigned reads r's SigV4 signature (its Authorization header or a
// presigned URL's query) without checking it, so that a caller can judge
// the credential scope it claims (its region, its service, the failure
// bound of its key: [Verifier.Admit]) before it spends a verification on
// it; [Verifier.VerifySigned] then checks it. The error is AWS's answer
// to a missing or malformed signature.
func ParseSigned(r *http.Request) (Signed, *Error) {
	a, err := parseRequestAuth(r)
	if err != nil {
		return Signed{}, AuthError(err)
	}
	return Signed{Cred: a.cred, auth: a}, nil
}

// VerifySigned is [Verifier.VerifyHeaders] on a signature ParseSigned
// read from r.
func (v *Verifier) VerifySigned(r *http.Request, s Signed, remote string) (Pending, *Error) {
	key, known := s.key, s.key != nil
	if !s.keys {
		key, known = v.keys.Load().keys[s.auth.cred.AccessKeyID]
	}
	p, e := v.verifyHeaders(r, s.auth, key, known)
	if e != nil {
		v.note(s.Cred.AccessKeyID, remote, false)
	} else if p.payload != nil {
		p.payload.v, p.payload.id, p.payload.remote = v, p.Cred.AccessKeyID, remote
	}
	return p, e
}

// VerifyBody finishes the verification VerifyHeaders began, with the
// body: its hash must be the one signed. Errors are [Verifier.Verify]'s,
// and counted against remote.
func (v *Verifier) VerifyBody(r *http.Request, p Pending, body []byte, remote string) (Credential, *Error) {
	e := v.verifyBody(r, &p, body)
	if e != nil {
		if p.payload == nil || !p.payload.done { // else counted as read
			v.noteOutcome(r, p.Cred.AccessKeyID, remote, false)
		}
		return Credential{}, e
	}
	v.noteSuccess(p.key, p.Cred.AccessKeyID, remote)
	return p.Cred, nil
}

// SignatureVerified reports whether the signature itself was verified from
// the headers (the request declared its payload's hash): the request is
// then its key's, and only its body's hash is left to check.
func (p Pending) SignatureVerified() bool { return p.payload != nil }

// Errors of verification, as AWS words them.
func errUnrecognizedClient() *Error {
	return &Error{http.StatusBadRequest, CodeUnrecognizedClient, msgUnrecognizedClient}
}

func errInvalidSignature() *Error {
	return &Error{http.StatusBadRequest, CodeInvalidSignature, msgInvalidSignature}
}

func errPayloadHash() *Error {
	return &Error{http.StatusBadRequest, CodeInvalidSignature,
		"The provided 'x-amz-content-sha256' header does not match what was computed."}
}

func (v *Verifier) verifyHeaders(r *http.Request, a requestAuth, key *keyState, known bool) (Pending, *Error) {
	if !known {
		return Pending{}, errUnrecognizedClient()
	}
	// A temporary key must come with its own token; a long-term key
	// with none: AWS refuses a token it did not issue to the key.
	if !equalString(a.token, key.secret.SessionToken) {
		return Pending{}, errUnrecognizedClient()
	}
	if a.date[:8] != a.cred.Date {
		return Pending{}, &Error{http.StatusBadRequest, CodeInvalidSignature,
			"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '" + a.cred.Date + "' != '" + a.date[:8] + "', from '" + a.date + "'."}
	}
	if e := checkTime(a.signed, v.now().UTC(), a.expires); e != nil {
		return Pending{}, e
	}
	if e := checkAmzHeadersSigned(r.Header, a.signedHeaders); e != nil {
		return Pending{}, e
	}
	p := Pending{Cred: a.cred, auth: a, key: key}
	if declared := r.Header[headerContentSHA]; len(declared) > 0 {
		// UNSIGNED-PAYLOAD too: an AWS JSON body is always signed.
		var sum [sha256.Size]byte
		if len(declared) > 1 || len(declared[0]) != 2*sha256.Size || !isLowerHex(declared[0]) {
			return Pending{}, errPayloadHash()
		}
		payload := []byte(declared[0])
		hex.Decode(sum[:], payload)
		if !v.signatureMatches(r, &p, payload) {
			return Pending{}, errInvalidSignature()
		}
		p.payload = &payloadCheck{want: sum}
	}
	return p, nil
}

func (v *Verifier) verifyBody(r *http.Request, p *Pending, body []byte) *Error {
	if p.payload != nil {
		if !p.payload.matched(body) {
			return errPayloadHash()
		}
		return nil
	}
	s := signers.Get().(*signer)
	defer signers.Put(s)
	if !v.signatureMatches(r, p, s.payloadHash(body)) {
		return errInvalidSignature()
	}
	return nil
}

// signatureMatches reports whether the request's signature is the one
// its key's secret gives over the payload hash payload. A key derived
// for a signature that matched is kept for the next ones.
func (v *Verifier) signatureMatches(r *http.Request, p *Pending, payload []byte) bool {
	key, cached := p.key.signing.get(p.Cred)
	if !cached {
		key = deriveSigningKey(p.key.secret.SecretAccessKey, p.Cred)
	}
	s := signers.Get().(*signer)
	want := s.signature(key, r, &p.auth, payload)
	ok := equalHex(want, p.auth.signature)
	signers.Put(s)
	if ok && !cached {
		p.key.signing.put(p.Cred, key)
	}
	return ok
}

// checkAmzHeadersSigned refuses a request with an X-Amz-* header its
// signature does not cover, as AWS does (S3 words it; the rule is
// SigV4's): an unsigned header could be added or changed by anyone on
// the way, X-Amz-Target (the operation) among them.
func checkAmzHeadersSigned(h http.Header, signedHeaders string) *Error {
	var missing []string
	for name := range h {
		if len(name) >= 6 && strings.EqualFold(name[:6], "x-amz-") && !listed(signedHeaders, name) {
			missing = append(missing, strings.ToLower(name))
		}
	}
	if missing == nil {
		return nil
	}
	slices.Sort(missing)
	msg := "There were headers present in the request which were not signed: " + strings.Join(missing, ", ")
	return &Error{http.StatusForbidden, CodeAccessDenied, ClipMessage(msg)}
}

// listed reports whether name, in any case, is one of the ';'-separated
// names.
func listed(names, name string) bool {
	for names != "" {
		var n string
		n, names, _ = strings.Cut(names, ";")
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// equalString compares two strings in time that depends on their
// lengths only.
func equalString(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := 0; i < len(a); i++ {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// payloadCheck is the body hash a signature verified from the headers
// covers (X-Amz-Content-Sha256), and what the body read so far hashes to.
type payloadCheck struct {
	want   sha256sum
	h      hash.Hash // nil until the body is read through Pending.Body
	done   bool      // the body was read to its end through Pending.Body
	ok     bool      // and hashed to want
	v      *Verifier // counts a mismatch against id and remote
	id     string
	remote string
}

type sha256sum = [sha256.Size]byte

// matched reports whether the body hashed to the declared hash: as it was
// read through [Pending.Body], or else now.
func (c *payloadCheck) matched(body []byte) bool {
	if c.done {
		return c.ok
	}
	return sha256.Sum256(body) == c.want
}

// Body returns the reader to read the request's body through. When the
// signature is verified already (the request declared its payload hash),
// it hashes the body as it arrives, and at its end answers an
// InvalidSignatureException (an *[Error]) instead of io.EOF if the body is
// not the one signed (counted as a failure, as VerifyBody counts one), so
// that a caller stops at once; otherwise it is
// body itself and [Verifier.VerifyBody] hashes the body once read.
func (p Pending) Body(body io.ReadCloser) io.ReadCloser {
	if p.payload == nil {
		return body
	}
	p.payload.h = sha256.New()
	return &payloadReader{ReadCloser: body, c: p.payload}
}

// payloadReader hashes a body as it is read (see [Pending.Body]).
type payloadReader struct {
	io.ReadCloser
	c *payloadCheck
}

func (r *payloadReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.c.h.Write(b[:n])
	if err == io.EOF && !r.c.done {
		var sum sha256sum
		r.c.h.Sum(sum[:0])
		r.c.done, r.c.ok = true, sum == r.c.want
		if !r.c.ok {
			r.c.v.note(r.c.id, r.c.remote, false)
			return n, errPayloadHash()
		}
	}
	return n, err
}

// checkTime refuses a signing time further than MaxSkew from now, or a
// presigned URL past its expiry.
func checkTime(signed, now time.Time, expires time.Duration) *Error {
	f := func(t time.Time) string { return t.Format(amzDateFormat) }
	if expires > 0 {
		if end := signed.Add(expires); now.After(end) {
			return &Error{http.StatusBadRequest, CodeInvalidSignature,
				"Signature expired: " + f(end) + " is now earlier than " + f(now) + "."}
		}
	} else if earliest := now.Add(-MaxSkew); signed.Before(earliest) {
		return &Error{http.StatusBadRequest, CodeInvalidSignature,
			"Signature expired: " + f(signed) + " is now earlier than " + f(earliest) + " (" + f(now) + " - 5 min.)"}
	}
	if latest := now.Add(MaxSkew); signed.After(latest) {
		return &Error{http.StatusBadRequest, CodeInvalidSignature,
			"Signature not yet current: " + f(signed) + " is still later than " + f(latest) + " (" + f(now) + " + 5 min.)"}
	}
	return nil
}
