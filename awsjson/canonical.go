package awsjson

// This file computes a request's SigV4 signature as the client computed
// it: the canonical request over exactly the headers its SignedHeaders
// lists, the string to sign and the HMAC under a cached signing key. Each
// step follows aws-sdk-go-v2's signer (aws/signer/v4: httpSigner.Build and
// its helpers) byte for byte, which FuzzCanonicalMatchesTheSDK checks on
// random requests; it differs only in which headers it signs: the SDK
// leaves out User-Agent, X-Amzn-Trace-Id, Expect and Transfer-Encoding
// even when asked to sign them, and this signs what the client listed, as
// AWS does (AWS SDK for Java v1 signs User-Agent).

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// canonicalRequest appends the canonical request of r, signed over the
// headers a lists and the payload hash payload, to dst. The headers must
// be sorted and unique (parseRequestAuth checks it), as every signer
// lists them.
func canonicalRequest(dst []byte, r *http.Request, a *requestAuth, payload []byte) []byte {
	dst = append(dst, r.Method...)
	dst = append(dst, '\n')
	dst = appendCanonicalPath(dst, r.URL.EscapedPath())
	dst = append(dst, '\n')
	dst = appendCanonicalQuery(dst, r.URL.RawQuery, a.presigned)
	dst = append(dst, '\n')
	for name := range strings.SplitSeq(a.signedHeaders, ";") {
		dst = append(dst, name...)
		dst = append(dst, ':')
		switch name {
		case "host":
			dst = append(dst, stripExcessSpaces(hostOf(r))...)
		case "content-length":
			if r.ContentLength >= 0 {
				dst = strconv.AppendInt(dst, r.ContentLength, 10)
			} else {
				dst = appendHeaderValues(dst, r.Header[http.CanonicalHeaderKey(name)])
			}
		default:
			dst = appendHeaderValues(dst, headerValues(r.Header, name))
		}
		dst = append(dst, '\n')
	}
	dst = append(dst, '\n')
	dst = append(dst, a.signedHeaders...)
	dst = append(dst, '\n')
	return append(dst, payload...)
}

// headerValues are the values of the header named (in lower case) name.
// The common names are looked up without building their canonical form.
func headerValues(h http.Header, name string) []string {
	switch name {
	case "content-type":
		return h["Content-Type"]
	case "x-amz-date":
		return h["X-Amz-Date"]
	case "x-amz-target":
		return h["X-Amz-Target"]
	case "x-amz-security-token":
		return h["X-Amz-Security-Token"]
	case "x-amz-content-sha256":
		return h["X-Amz-Content-Sha256"]
	case "user-agent":
		return h["User-Agent"]
	case "amz-sdk-invocation-id":
		return h["Amz-Sdk-Invocation-Id"]
	case "amz-sdk-request":
		return h["Amz-Sdk-Request"]
	case "x-amzn-trace-id":
		return h["X-Amzn-Trace-Id"]
	}
	return h[http.CanonicalHeaderKey(name)]
}

// appendHeaderValues appends a header's values as the SDK signs them:
// each with its runs of spaces made one and trimmed, joined by commas.
func appendHeaderValues(dst []byte, values []string) []byte {
	for i, v := range values {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendStripped(dst, strings.TrimSpace(v))
	}
	return dst
}

// appendStripped appends s with each run of spaces made one space (the
// SDK's StripExcessSpaces; s is already trimmed).
func appendStripped(dst []byte, s string) []byte {
	for {
		i := strings.Index(s, "  ")
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i+1]...)
		s = strings.TrimLeft(s[i:], " ")
	}
}

// stripExcessSpaces is the SDK's StripExcessSpaces: s without its leading
// and trailing spaces and with each inner run of spaces made one.
func stripExcessSpaces(s string) string {
	s = strings.Trim(s, " ")
	if !strings.Contains(s, "  ") {
		return s
	}
	return string(appendStripped(nil, s))
}

// hostOf is the host the SDK signs: the Host header, without the port
// when it is the scheme's default.
func hostOf(r *http.Request) string {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	colon := strings.IndexByte(host, ':')
	if colon < 0 {
		return host
	}
	var port string
	if i := strings.Index(host, "]:"); i >= 0 {
		port = host[i+2:]
	} else if !strings.Contains(host, "]") {
		port = host[colon+1:]
	}
	if (r.TLS == nil && port == "80") || (r.TLS != nil && port == "443") {
		// The SDK's stripPort.
		if i := strings.IndexByte(host, ']'); i >= 0 {
			return strings.TrimPrefix(host[:i], "[")
		}
		return host[:colon]
	}
	return host
}

// appendCanonicalPath appends the path as the SDK signs it for every
// service but S3: the escaped path ("/" if empty), escaped once more.
func appendCanonicalPath(dst []byte, escaped string) []byte {
	if escaped == "" {
		return append(dst, '/')
	}
	for i := 0; i < len(escaped); i++ {
		if c := escaped[i]; isUnreserved(c) || c == '/' {
			dst = append(dst, c)
		} else {
			dst = appendEscaped(dst, c)
		}
	}
	return dst
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func appendEscaped(dst []byte, c byte) []byte {
	const upperHex = "0123456789ABCDEF"
	return append(dst, '%', upperHex[c>>4], upperHex[c&15])
}

// appendQueryComponent appends s URI-encoded as SigV4 wants a query name
// or value: everything but the unreserved characters escaped.
func appendQueryComponent(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; isUnreserved(c) {
			dst = append(dst, c)
		} else {
			dst = appendEscaped(dst, c)
		}
	}
	return dst
}

// appendCanonicalQuery appends the canonical query string: the query's
// parameters (as url.ParseQuery reads them, those it cannot read left
// out), each name and value encoded, sorted by name then value, joined
// with '&'; a presigned URL's without its X-Amz-Signature.
func appendCanonicalQuery(dst []byte, raw string, presigned bool) []byte {
	if raw == "" {
		return dst
	}
	q, _ := url.ParseQuery(raw)
	if presigned {
		delete(q, querySignature)
	}
	type param struct{ name, value string }
	var params []param
	var enc []byte
	for name, values := range q {
		n := string(appendQueryComponent(enc[:0], name))
		for _, v := range values {
			params = append(params, param{n, string(appendQueryComponent(enc[:0], v))})
		}
	}
	slices.SortFunc(params, func(a, b param) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.value, b.value)
	})
	for i, p := range params {
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = append(dst, p.name...)
		dst = append(dst, '=')
		dst = append(dst, p.value...)
	}
	return dst
}

// appendStringToSign appends the string to sign of a canonical request
// whose SHA-256 is sum.
func appendStringToSign(dst []byte, amzDate string, c Credential, sum *[sha256.Size]byte) []byte {
	dst = append(dst, sigv4Algorithm+"\n"...)
	dst = append(dst, amzDate...)
	dst = append(dst, '\n')
	dst = appendScope(dst, c)
	dst = append(dst, '\n')
	return hex.AppendEncode(dst, sum[:])
}

// appendScope appends the credential scope date/region/service/aws4_request.
func appendScope(dst []byte, c Credential) []byte {
	dst = append(dst, c.Date...)
	dst = append(dst, '/')
	dst = append(dst, c.Region...)
	dst = append(dst, '/')
	dst = append(dst, c.Service...)
	return append(dst, "/aws4_request"...)
}

// signingKey is a derived SigV4 signing key.
type signingKey [sha256.Size]byte

// deriveSigningKey derives the signing key of a secret for a credential
// scope: HMAC chained over "AWS4"+secret, date, region, service and
// "aws4_request".
func deriveSigningKey(secret string, c Credential) signingKey {
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	k := mac([]byte("AWS4"+secret), c.Date)
	k = mac(k, c.Region)
	k = mac(k, c.Service)
	return signingKey(mac(k, "aws4_request"))
}

// signingKeys are the signing keys of an access key's recent good
// signatures, by scope: at most maxScopesPerKey (a few regions and
// services, across midnight UTC), the oldest forgotten first. Only a
// signature that verified adds to them, so failures cannot fill them.
// Reads take no lock: the list is replaced, never changed.
type signingKeys struct {
	scopes atomic.Pointer[scopeList]
}

// maxScopesPerKey bounds the signing keys kept per access key.
const maxScopesPerKey = 4

// scopeList is a key's signing keys, their scopes inline: finding one
// reads one allocation, which matters among thousands of keys.
type scopeList struct {
	n    uint8
	keys [maxScopesPerKey]scopedKey
}

// maxScopeLen is the longest date/region/service parseCredential lets
// through.
const maxScopeLen = 8 + 1 + 64 + 1 + 64

// scopedKey is a signing key and the scope it signs for.
type scopedKey struct {
	// The key, then the scope: a list's first entry and a short scope
	// ("20261207/us-east-1/ecs") share one cache line.
	key      signingKey
	scopeLen uint8
	scope    [maxScopeLen]byte // date/region/service
}

// matches reports whether k signs for c's scope.
func (k *scopedKey) matches(c Credential) bool {
	s, d, r := k.scope[:k.scopeLen], len(c.Date), len(c.Region)
	return len(s) == d+r+len(c.Service)+2 && string(s[:d]) == c.Date && string(s[d+1:d+1+r]) == c.Region && string(s[d+r+2:]) == c.Service
}

func (k *signingKeys) get(c Credential) (signingKey, bool) {
	if l := k.scopes.Load(); l != nil {
		for i := range l.n {
			if s := &l.keys[i]; s.matches(c) {
				return s.key, true
			}
		}
	}
	return signingKey{}, false
}

func (k *signingKeys) put(c Credential, key signingKey) {
	scope := c.Date + "/" + c.Region + "/" + c.Service
	if len(scope) > maxScopeLen {
		return // parseCredential lets none through
	}
	next := &scopeList{n: 1}
	next.keys[0].scopeLen = uint8(copy(next.keys[0].scope[:], scope))
	next.keys[0].key = key
	if l := k.scopes.Load(); l != nil {
		next.n += uint8(copy(next.keys[1:], l.keys[:l.n]))
	}
	k.scopes.Store(next)
}

// signer is the per-call scratch of a signature: a canonical request and
// a string to sign are built in buf, hashed by h, and signed by HMAC's
// inner and outer hashes. Pooled: a verification allocates nothing.
type signer struct {
	buf          []byte
	h            hash.Hash
	inner, outer hash.Hash
	sum          [sha256.Size]byte
	pad          [sha256.BlockSize]byte
	payload      [2 * sha256.Size]byte // a body's hash, hex
	sig          [2 * sha256.Size]byte // the signature, hex
}

var signers = sync.Pool{New: func() any {
	return &signer{buf: make([]byte, 0, 1024), h: sha256.New(), inner: sha256.New(), outer: sha256.New()}
}}

// payloadHash returns the hex SHA-256 of body, valid until s is reused.
func (s *signer) payloadHash(body []byte) []byte {
	s.h.Reset()
	s.h.Write(body)
	hex.Encode(s.payload[:], s.h.Sum(s.sum[:0]))
	return s.payload[:]
}

// signature computes the hex signature of r as the client computed it,
// valid until s is reused.
func (s *signer) signature(key signingKey, r *http.Request, a *requestAuth, payload []byte) *[2 * sha256.Size]byte {
	s.buf = canonicalRequest(s.buf[:0], r, a, payload)
	s.h.Reset()
	s.h.Write(s.buf)
	s.h.Sum(s.sum[:0])
	s.buf = appendStringToSign(s.buf[:0], a.date, a.cred, &s.sum)
	// HMAC-SHA256 (RFC 2104) under the signing key, as crypto/hmac
	// computes it, with no allocation.
	s.setPad(&key, 0x36)
	s.inner.Reset()
	s.inner.Write(s.pad[:])
	s.inner.Write(s.buf)
	s.inner.Sum(s.sum[:0])
	s.setPad(&key, 0x5c)
	s.outer.Reset()
	s.outer.Write(s.pad[:])
	s.outer.Write(s.sum[:])
	s.outer.Sum(s.sum[:0])
	hex.Encode(s.sig[:], s.sum[:])
	return &s.sig
}

// setPad sets s.pad to the key, zero-padded to a block, XOR x.
func (s *signer) setPad(key *signingKey, x byte) {
	for i := range s.pad {
		s.pad[i] = x
	}
	for i, b := range key {
		s.pad[i] = b ^ x
	}
}

// equalHex compares a computed signature with the client's in constant
// time.
func equalHex(want *[2 * sha256.Size]byte, got string) bool {
	if len(got) != len(want) {
		return false
	}
	var d byte
	for i := range want {
		d |= want[i] ^ got[i]
	}
	return d == 0
}
