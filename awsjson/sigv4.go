package awsjson

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Errors of the AWS request parsers. Each maps to the AWS error code a real
// service answers with.
var (
	// ErrMissingAuth: no Authorization header (MissingAuthenticationTokenException).
	ErrMissingAuth = errors.New("request is missing an Authorization header")
	// ErrBadAuth: an Authorization header that is not a well-formed SigV4
	// header (IncompleteSignatureException).
	ErrBadAuth = errors.New("malformed SigV4 Authorization header")
	// ErrBadTarget: a missing or malformed X-Amz-Target header.
	ErrBadTarget = errors.New("malformed X-Amz-Target header")
)

// Credential is the credential scope of a SigV4 Authorization header:
// Credential=AccessKeyID/Date/Region/Service/aws4_request.
type Credential struct {
	AccessKeyID string // the access key id: letters, digits and '_'
	Date        string // the signing date, yyyymmdd
	Region      string // the region the request is signed for
	Service     string // the SigV4 service name: "ecs", "servicediscovery"
}

const sigv4Algorithm = "AWS4-HMAC-SHA256"

// ParseAuthorization reads the credential scope from a SigV4 Authorization
// header:
//
//	AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host;x-amz-date, Signature=…
//
// It checks the shape of the header, not the signature (see [Verifier]).
// A parameter given twice is an error, as it would let two parsers read
// two identities from one header. Errors wrap [ErrMissingAuth] or
// [ErrBadAuth], and quote at most a short prefix of the header.
func ParseAuthorization(header string) (Credential, error) {
	p, err := parseAuthorization(header)
	return p.cred, err
}

// CredentialOf reads the credential scope of a request's signature: its
// Authorization header, or else the X-Amz-Credential of a presigned URL's
// query. It checks the shape, not the signature. Errors are
// [ParseAuthorization]'s.
func CredentialOf(r *http.Request) (Credential, error) {
	if h := r.Header.Get("Authorization"); h != "" || r.URL.RawQuery == "" {
		return ParseAuthorization(h)
	}
	a, err := parseRequestAuth(r)
	return a.cred, err
}

// authorization is a parsed Authorization header.
type authorization struct {
	cred                     Credential
	signedHeaders, signature string
}

func parseAuthorization(header string) (authorization, error) {
	if header == "" {
		return authorization{}, ErrMissingAuth
	}
	alg, params, ok := strings.Cut(header, " ")
	if !ok || alg != sigv4Algorithm {
		return authorization{}, fmt.Errorf("%w: want algorithm %s", ErrBadAuth, sigv4Algorithm)
	}
	var cred, signedHeaders, signature string
	var seen [3]bool
	for p := range strings.SplitSeq(params, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return authorization{}, fmt.Errorf("%w: parameter %s is not name=value", ErrBadAuth, Clip(p))
		}
		if name = strings.TrimSpace(name); !isWord(name, 64) {
			// Such as "AWS4-HMAC-SHA256 Credential": two headers joined
			// with a comma by a proxy.
			return authorization{}, fmt.Errorf("%w: parameter name %s is not a word", ErrBadAuth, Clip(name))
		}
		var dst *string
		var i int
		switch name {
		case "Credential":
			dst, i = &cred, 0
		case "SignedHeaders":
			dst, i = &signedHeaders, 1
		case "Signature":
			dst, i = &signature, 2
		default:
			continue
		}
		if seen[i] {
			return authorization{}, fmt.Errorf("%w: more than one %s parameter", ErrBadAuth, name)
		}
		seen[i], *dst = true, value
	}
	switch {
	case cred == "":
		return authorization{}, fmt.Errorf("%w: missing Credential", ErrBadAuth)
	case signedHeaders == "":
		return authorization{}, fmt.Errorf("%w: missing SignedHeaders", ErrBadAuth)
	case signature == "":
		return authorization{}, fmt.Errorf("%w: missing Signature", ErrBadAuth)
	}
	c, err := parseCredential(cred)
	if err != nil {
		return authorization{}, err
	}
	return authorization{cred: c, signedHeaders: signedHeaders, signature: signature}, nil
}

// parseCredential reads AccessKeyID/Date/Region/Service/aws4_request.
func parseCredential(cred string) (Credential, error) {
	var c Credential
	rest, ok := cred, true
	for _, part := range [...]*string{&c.AccessKeyID, &c.Date, &c.Region, &c.Service} {
		if ok {
			*part, rest, ok = strings.Cut(rest, "/")
		}
	}
	if !ok || rest != "aws4_request" {
		return Credential{}, fmt.Errorf("%w: Credential %s is not AccessKeyID/Date/Region/Service/aws4_request", ErrBadAuth, Clip(cred))
	}
	switch {
	case !isWord(c.AccessKeyID, 128):
		return Credential{}, fmt.Errorf("%w: access key id %s", ErrBadAuth, Clip(c.AccessKeyID))
	case len(c.Date) != 8 || !isDigits(c.Date):
		return Credential{}, fmt.Errorf("%w: credential date %s is not yyyymmdd", ErrBadAuth, Clip(c.Date))
	case !isLowerName(c.Region):
		return Credential{}, fmt.Errorf("%w: region %s", ErrBadAuth, Clip(c.Region))
	case !isLowerName(c.Service):
		return Credential{}, fmt.Errorf("%w: service %s", ErrBadAuth, Clip(c.Service))
	}
	return c, nil
}

// wrapBadAuth is an [ErrBadAuth] saying why.
func wrapBadAuth(why string) error { return fmt.Errorf("%w: %s", ErrBadAuth, why) }

// ParseTarget splits an X-Amz-Target header, "Prefix.Action", e.g.
// "AmazonEC2ContainerServiceV20141113.DescribeClusters". Errors wrap
// [ErrBadTarget].
func ParseTarget(header string) (prefix, action string, err error) {
	if header == "" {
		return "", "", fmt.Errorf("%w: missing", ErrBadTarget)
	}
	i := strings.LastIndexByte(header, '.')
	if i < 0 {
		return "", "", fmt.Errorf("%w: %s is not Prefix.Action", ErrBadTarget, Clip(header))
	}
	prefix, action = header[:i], header[i+1:]
	if !isWord(prefix, 128) || !isWord(action, 128) {
		return "", "", fmt.Errorf("%w: %s is not Prefix.Action", ErrBadTarget, Clip(header))
	}
	return prefix, action, nil
}

// isWord reports whether s is 1 to max letters, digits or underscores.
func isWord(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ValidRegion reports whether s is a region name as a credential scope
// carries it: 1 to 64 lowercase letters, digits and dashes.
func ValidRegion(s string) bool { return isLowerName(s) }

// isLowerName reports whether s looks like an AWS region or service name:
// lowercase letters, digits and dashes, at most 64 bytes.
func isLowerName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// MaxEcho is the most of a client's input an error message quotes.
const MaxEcho = 64

// Clip quotes s for an error message: whole when short, else its first
// MaxEcho bytes and its length, so that a huge header is never echoed back.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:MaxEcho]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
