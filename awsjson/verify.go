package awsjson

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// AWS's error codes and messages for a request that fails authentication,
// as the AWS JSON services answer them (HTTP 400 each).
const (
	CodeUnrecognizedClient = "UnrecognizedClientException"
	CodeInvalidSignature   = "InvalidSignatureException"

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
// keys of a [Credentials]. The canonical request and the signature are
// computed by aws-sdk-go-v2's signer, one per access key, so a key's
// signing key is derived once per day, region and service. Signatures are
// compared in constant time.
//
// A Verifier is safe for concurrent use; [Verifier.SetCredentials]
// replaces the keys while requests are verified.
type Verifier struct {
	keys     atomic.Pointer[verifierKeys]
	now      func() time.Time
	failures *FailureBound
}

// verifierKeys are one Credentials with a signer per access key.
type verifierKeys struct {
	creds   *Credentials
	signers map[string]*v4.Signer
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
func (v *Verifier) SetCredentials(c *Credentials) {
	k := &verifierKeys{creds: c, signers: make(map[string]*v4.Signer, len(c.keys))}
	for id := range c.keys {
		k.signers[id] = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableHeaderHoisting = true })
	}
	v.keys.Store(k)
}

// Credentials returns the keys in use.
func (v *Verifier) Credentials() *Credentials { return v.keys.Load().creds }

// Verify checks r's signature over body and returns the credential scope
// it verified. The error is the one AWS answers with: a missing signature
// MissingAuthenticationTokenException, a malformed one
// IncompleteSignatureException, an unknown key UnrecognizedClientException,
// a wrong signature, a body changed after signing or a time out of
// [MaxSkew] InvalidSignatureException. The outcome is told to the
// failure bound (see [Verifier.Admit]) under remote, the client's address.
func (v *Verifier) Verify(r *http.Request, body []byte, remote string) (Credential, *Error) {
	cred, e := v.verify(r, body)
	v.noteOutcome(r, cred.AccessKeyID, remote, e == nil)
	return cred, e
}

func (v *Verifier) verify(r *http.Request, body []byte) (Credential, *Error) {
	a, err := parseRequestAuth(r)
	if err != nil {
		e := AuthError(err)
		if e.Code == CodeMissingAuthToken {
			e.Message = msgMissingAuth
		}
		return Credential{}, e
	}
	keys := v.keys.Load()
	secret, ok := keys.creds.keys[a.cred.AccessKeyID]
	if !ok {
		return Credential{}, &Error{http.StatusBadRequest, CodeUnrecognizedClient, msgUnrecognizedClient}
	}
	if secret.SessionToken != "" && !hmac.Equal([]byte(a.token), []byte(secret.SessionToken)) {
		return Credential{}, &Error{http.StatusBadRequest, CodeUnrecognizedClient, msgUnrecognizedClient}
	}
	if a.date[:8] != a.cred.Date {
		return Credential{}, &Error{http.StatusBadRequest, CodeInvalidSignature,
			"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '" + a.cred.Date + "' != '" + a.date[:8] + "', from '" + a.date + "'."}
	}
	signed, _ := time.Parse(amzDateFormat, a.date) // parseRequestAuth checked it
	now := v.now().UTC()
	if e := checkTime(signed, now, a.expires); e != nil {
		return Credential{}, e
	}
	payload := r.Header.Get(headerContentSHA)
	sum := sha256.Sum256(body)
	bodyHash := hex.EncodeToString(sum[:])
	if payload == "" {
		payload = bodyHash
	} else if payload != bodyHash {
		// UNSIGNED-PAYLOAD too: an AWS JSON body is always signed.
		return Credential{}, &Error{http.StatusBadRequest, CodeInvalidSignature,
			"The provided 'x-amz-content-sha256' header does not match what was computed."}
	}
	want, err := expectedSignature(keys.signers[a.cred.AccessKeyID], r, a, aws.Credentials{
		AccessKeyID: a.cred.AccessKeyID, SecretAccessKey: secret.SecretAccessKey, SessionToken: a.token,
	}, payload, signed)
	if err != nil || !hmac.Equal([]byte(want), []byte(a.signature)) {
		return Credential{}, &Error{http.StatusBadRequest, CodeInvalidSignature, msgInvalidSignature}
	}
	return a.cred, nil
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

// expectedSignature re-signs the parts of r that the client signed, as it
// listed them, and returns the signature.
func expectedSignature(s *v4.Signer, r *http.Request, a requestAuth, creds aws.Credentials, payload string, signed time.Time) (string, error) {
	u := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath}
	if r.TLS != nil {
		u.Scheme = "https"
	}
	q := r.URL.Query()
	q.Del(querySignature)
	u.RawQuery = q.Encode()
	c := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: make(http.Header, len(a.signedHeaders))}
	for _, name := range a.signedHeaders {
		switch name {
		case "host":
		case "content-length":
			c.ContentLength = r.ContentLength
		default:
			if vs := r.Header.Values(name); len(vs) > 0 {
				c.Header[http.CanonicalHeaderKey(name)] = vs
			}
		}
	}
	ctx := context.Background()
	if a.presigned {
		signedURL, _, err := s.PresignHTTP(ctx, creds, c, payload, a.cred.Service, a.cred.Region, signed)
		if err != nil {
			return "", err
		}
		pu, err := url.Parse(signedURL)
		if err != nil {
			return "", err
		}
		return pu.Query().Get(querySignature), nil
	}
	if err := s.SignHTTP(ctx, creds, c, payload, a.cred.Service, a.cred.Region, signed); err != nil {
		return "", err
	}
	_, sig, _ := strings.Cut(c.Header.Get("Authorization"), "Signature=")
	return sig, nil
}

// requestAuth is what a request says of its signature, in its
// Authorization header or its presigned query.
type requestAuth struct {
	cred          Credential
	signedHeaders []string // lower case, as listed
	signature     string
	date          string        // X-Amz-Date, yyyymmddThhmmssZ
	token         string        // X-Amz-Security-Token
	expires       time.Duration // a presigned URL's X-Amz-Expires; 0 for a header
	presigned     bool
}

// parseRequestAuth reads a request's SigV4 parameters: the Authorization
// header, or else the X-Amz-* query parameters of a presigned URL.
func parseRequestAuth(r *http.Request) (requestAuth, error) {
	var a requestAuth
	if h := r.Header.Get("Authorization"); h != "" || r.URL.RawQuery == "" {
		p, err := parseAuthorization(h)
		if err != nil {
			return a, err
		}
		a.cred, a.signature, a.date, a.token = p.cred, p.signature, r.Header.Get(headerAmzDate), r.Header.Get(headerToken)
		a.signedHeaders = strings.Split(p.signedHeaders, ";")
		if a.date == "" {
			return a, wrapBadAuth("Authorization header requires existence of a 'X-Amz-Date' header")
		}
	} else {
		q := r.URL.Query()
		if q.Get("X-Amz-Algorithm") == "" && q.Get(querySignature) == "" {
			return a, ErrMissingAuth
		}
		if alg := q.Get("X-Amz-Algorithm"); alg != sigv4Algorithm {
			return a, wrapBadAuth("X-Amz-Algorithm must be " + sigv4Algorithm)
		}
		cred, err := parseCredential(q.Get("X-Amz-Credential"))
		if err != nil {
			return a, err
		}
		a.cred, a.signature, a.date, a.token, a.presigned = cred, q.Get(querySignature), q.Get(headerAmzDate), q.Get(headerToken), true
		a.signedHeaders = strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
		n, err := strconv.Atoi(q.Get("X-Amz-Expires"))
		if err != nil || n <= 0 || time.Duration(n)*time.Second > maxPresignExpiry {
			return a, wrapBadAuth("X-Amz-Expires must be a number of seconds from 1 to 604800")
		}
		a.expires = time.Duration(n) * time.Second
		if a.signature == "" || a.date == "" || len(a.signedHeaders) == 0 || a.signedHeaders[0] == "" {
			return a, wrapBadAuth("a presigned URL needs X-Amz-Signature, X-Amz-Date and X-Amz-SignedHeaders")
		}
	}
	if _, err := time.Parse(amzDateFormat, a.date); err != nil {
		return a, wrapBadAuth("X-Amz-Date " + Clip(a.date) + " is not yyyymmddThhmmssZ")
	}
	if len(a.signedHeaders) > 64 {
		return a, wrapBadAuth("more than 64 signed headers")
	}
	host := false
	for _, h := range a.signedHeaders {
		if h != strings.ToLower(h) || h == "" || strings.ContainsAny(h, " \t") {
			return a, wrapBadAuth("SignedHeaders " + Clip(strings.Join(a.signedHeaders, ";")) + " is not lower-case names joined by ';'")
		}
		host = host || h == "host"
	}
	if !host {
		return a, wrapBadAuth("'Host' must be a signed header")
	}
	if len(a.signature) != 64 {
		return a, wrapBadAuth("Signature is not 64 hexadecimal digits")
	}
	return a, nil
}
