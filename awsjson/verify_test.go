package awsjson_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/tollgate/tollgate/awsjson"
)

const testCredentials = `# tenants
[tenant-a]
aws_access_key_id = AKIDTENANTA
aws_secret_access_key = secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY

[tenant-b]
aws_access_key_id=AKIDTENANTB
aws_secret_access_key=secret-b
aws_session_token = token-b
`

var signedAt = time.Date(2026, 12, 5, 3, 15, 0, 0, time.UTC)

func newVerifier(t testing.TB, now time.Time) *awsjson.Verifier {
	t.Helper()
	c, err := awsjson.ParseCredentials([]byte(testCredentials))
	if err != nil {
		t.Fatal(err)
	}
	return awsjson.NewVerifier(c, awsjson.VerifierOptions{Now: func() time.Time { return now }})
}

// signed is a DescribeClusters call signed by aws-sdk-go-v2's signer, as
// the SDK sends it.
func signed(t testing.TB, key, secret, token string, body []byte, at time.Time) *http.Request {
	return signedWith(t, key, secret, token, body, at, "", "")
}

// signedWith is signed with the header name set to value before signing
// (value "": the header left out of the signature, and of the request).
func signedWith(t testing.TB, key, secret, token string, body []byte, at time.Time, name, value string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://ecs.us-east-1.amazonaws.com:8080/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	r.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.DescribeClusters")
	r.Header.Set("User-Agent", "aws-sdk-go-v2/1.0") // not signed by the SDK
	if name != "" {
		r.Header.Set(name, value)
		if value == "" {
			r.Header.Del(name)
		}
	}
	sum := sha256.Sum256(body)
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret, SessionToken: token},
		r, hex.EncodeToString(sum[:]), "ecs", "us-east-1", at)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestVerifyAcceptsTheSDKsSignature(t *testing.T) {
	v := newVerifier(t, signedAt.Add(time.Minute))
	body := []byte(`{"clusters":["default"]}`)
	for _, tc := range []struct{ name, key, secret, token string }{
		{"long-term key", "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", ""},
		{"key with a session token", "AKIDTENANTB", "secret-b", "token-b"},
	} {
		r := signed(t, tc.key, tc.secret, tc.token, body, signedAt)
		cred, e := v.Verify(r, body, "192.0.2.1:5000")
		if e != nil {
			t.Errorf("%s: %v", tc.name, e)
			continue
		}
		if cred.AccessKeyID != tc.key || cred.Region != "us-east-1" || cred.Service != "ecs" {
			t.Errorf("%s: credential %+v", tc.name, cred)
		}
		// Twice: the second from the signer's cached signing key.
		if _, e := v.Verify(signed(t, tc.key, tc.secret, tc.token, body, signedAt), body, "192.0.2.1:5000"); e != nil {
			t.Errorf("%s, again: %v", tc.name, e)
		}
	}
}

func TestVerifyRefusesAsAWSDoes(t *testing.T) {
	body := []byte(`{"clusters":["default"]}`)
	good := func() *http.Request {
		return signed(t, "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", "", body, signedAt)
	}
	for _, tc := range []struct {
		name  string
		req   func() *http.Request
		body  []byte
		now   time.Time
		code  string
		inMsg string
	}{
		{"wrong secret", func() *http.Request { return signed(t, "AKIDTENANTA", "not-the-secret", "", body, signedAt) }, body, signedAt,
			"InvalidSignatureException", "The request signature we calculated does not match"},
		{"unknown key", func() *http.Request { return signed(t, "AKIDMADEUP", "whatever", "", body, signedAt) }, body, signedAt,
			"UnrecognizedClientException", "The security token included in the request is invalid."},
		{"20 minutes old", good, body, signedAt.Add(20 * time.Minute),
			"InvalidSignatureException", "Signature expired: 20261205T031500Z is now earlier than 20261205T033000Z (20261205T033500Z - 5 min.)"},
		{"20 minutes ahead", good, body, signedAt.Add(-20 * time.Minute),
			"InvalidSignatureException", "Signature not yet current"},
		{"body changed after signing", good, []byte(`{"clusters":["other"]}`), signedAt,
			"InvalidSignatureException", "does not match"},
		{"signed header changed", func() *http.Request {
			r := good()
			r.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.DeleteCluster")
			return r
		}, body, signedAt, "InvalidSignatureException", "does not match"},
		{"host changed", func() *http.Request { r := good(); r.Host = "evil.example:8080"; return r }, body, signedAt,
			"InvalidSignatureException", "does not match"},
		{"missing", func() *http.Request { r := good(); r.Header.Del("Authorization"); return r }, body, signedAt,
			"MissingAuthenticationTokenException", "Missing Authentication Token"},
		{"no X-Amz-Date", func() *http.Request { r := good(); r.Header.Del("X-Amz-Date"); return r }, body, signedAt,
			"IncompleteSignatureException", "X-Amz-Date"},
		{"session token missing", func() *http.Request { return signed(t, "AKIDTENANTB", "secret-b", "", body, signedAt) }, body, signedAt,
			"UnrecognizedClientException", "invalid"},
		{"payload hash header that is not the body's", func() *http.Request {
			return signedWith(t, "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", "", body, signedAt, "X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}, body, signedAt, "InvalidSignatureException", "x-amz-content-sha256"},
		{"declared payload hash, another body", func() *http.Request {
			sum := sha256.Sum256(body)
			return signedWith(t, "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", "", body, signedAt, "X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
		}, []byte(`{"clusters":["other"]}`), signedAt, "InvalidSignatureException", "x-amz-content-sha256"},
		{"X-Amz-Target swapped when it was not signed", func() *http.Request {
			r := signedWith(t, "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", "", body, signedAt, "X-Amz-Target", "")
			r.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.DeleteCluster")
			return r
		}, body, signedAt, "AccessDeniedException", "There were headers present in the request which were not signed: x-amz-target"},
		{"an x-amz-* header added after signing", func() *http.Request {
			r := good()
			r.Header.Set("X-Amz-Meta-Evil", "1")
			return r
		}, body, signedAt, "AccessDeniedException", "x-amz-meta-evil"},
		{"long-term key with a security token", func() *http.Request {
			return signed(t, "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", "any-token", body, signedAt)
		}, body, signedAt, "UnrecognizedClientException", "The security token included in the request is invalid."},
		{"temporary key with another key's token", func() *http.Request {
			return signed(t, "AKIDTENANTB", "secret-b", "token-a", body, signedAt)
		}, body, signedAt, "UnrecognizedClientException", "The security token included in the request is invalid."},
		{"signature of the wrong length", func() *http.Request {
			r := good()
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "Signature=", "Signature=00", 1))
			return r
		}, body, signedAt, "IncompleteSignatureException", "Signature"},
	} {
		v := newVerifier(t, tc.now)
		_, e := v.Verify(tc.req(), tc.body, "192.0.2.1:5000")
		if e == nil {
			t.Errorf("%s: verified", tc.name)
			continue
		}
		status := http.StatusBadRequest
		if tc.code == "AccessDeniedException" {
			status = http.StatusForbidden
		}
		if e.Code != tc.code || e.Status != status || !strings.Contains(e.Message, tc.inMsg) {
			t.Errorf("%s: %d %s %q, want %d %s containing %q", tc.name, e.Status, e.Code, e.Message, status, tc.code, tc.inMsg)
		}
	}
}

func TestVerifyPresignedURL(t *testing.T) {
	v := newVerifier(t, signedAt.Add(time.Minute))
	r := httptest.NewRequest(http.MethodGet, "http://servicediscovery.us-east-1.amazonaws.com/?X-Amz-Expires=300&Action=x", nil)
	sum := sha256.Sum256(nil)
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDTENANTA", SecretAccessKey: "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY"},
		r, hex.EncodeToString(sum[:]), "servicediscovery", "us-east-1", signedAt)
	if err != nil {
		t.Fatal(err)
	}
	get := func() *http.Request { return httptest.NewRequest(http.MethodGet, u, nil) }
	cred, e := v.Verify(get(), nil, "192.0.2.1:1")
	if e != nil || cred.AccessKeyID != "AKIDTENANTA" || cred.Service != "servicediscovery" {
		t.Fatalf("presigned: %+v %v", cred, e)
	}
	if c, err := awsjson.CredentialOf(get()); err != nil || c.AccessKeyID != "AKIDTENANTA" {
		t.Errorf("CredentialOf(presigned) = %+v, %v", c, err)
	}
	late := newVerifier(t, signedAt.Add(6*time.Minute))
	if _, e := late.Verify(get(), nil, "192.0.2.1:1"); e == nil || !strings.Contains(e.Message, "Signature expired") {
		t.Errorf("presigned past X-Amz-Expires: %v", e)
	}
	tampered := get()
	q := tampered.URL.Query()
	q.Set("Action", "y")
	tampered.URL.RawQuery = q.Encode()
	if _, e := v.Verify(tampered, nil, "192.0.2.1:1"); e == nil || e.Code != "InvalidSignatureException" {
		t.Errorf("presigned with a changed parameter: %v", e)
	}
}

func TestParseCredentialsErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"", "no [section]"},
		{"[a]\naws_access_key_id = K1\n", "[a]: missing aws_secret_access_key"},
		{"[a]\naws_secret_access_key = s\n", "[a]: missing aws_access_key_id"},
		{"[a]\naws_access_key_id = K1\naws_secret_access_key = s\n[b]\naws_access_key_id = K1\naws_secret_access_key = t\n", "also in [a]"},
		{"[a]\naws_access_key_id = K 1\naws_secret_access_key = s\n", "is not 1 to 128"},
		{"[a\n", "not in the shared credentials file format"},
	} {
		_, err := awsjson.ParseCredentials([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCredentials(%q) = %v, want %q", tc.file, err, tc.want)
		}
	}
}

// FuzzVerify: any Authorization header, query and body is verified or
// refused with one of AWS's codes, never a panic.
func FuzzVerify(f *testing.F) {
	good := signed(f, "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", "", []byte(`{}`), signedAt)
	f.Add(good.Header.Get("Authorization"), good.Header.Get("X-Amz-Date"), "", []byte(`{}`))
	f.Add("AWS4-HMAC-SHA256 Credential=A/20261205/r/s/aws4_request, SignedHeaders=host, Signature=00", "20261205T031500Z", "", []byte{})
	f.Add("", "", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=A%2F20261205%2Fr%2Fs%2Faws4_request&X-Amz-Date=20261205T031500Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=ab", []byte{})
	v := newVerifier(f, signedAt)
	codes := map[string]bool{"InvalidSignatureException": true, "UnrecognizedClientException": true, "AccessDeniedException": true,
		"IncompleteSignatureException": true, "MissingAuthenticationTokenException": true}
	f.Fuzz(func(t *testing.T, auth, date, query string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "http://localhost:8080/", bytes.NewReader(body))
		r.URL.RawQuery = query
		r.Header.Set("Authorization", auth)
		r.Header.Set("X-Amz-Date", date)
		r.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.DescribeClusters")
		if _, e := v.Verify(r, body, "192.0.2.1:1"); e != nil && !codes[e.Code] {
			t.Errorf("code %s: %s", e.Code, e.Message)
		}
	})
}

// FuzzParseCredentials: any file is read or refused, never a panic.
func FuzzParseCredentials(f *testing.F) {
	f.Add([]byte(testCredentials))
	f.Add([]byte("[a]\naws_access_key_id=\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := awsjson.ParseCredentials(b)
		if err == nil && c.Len() == 0 {
			t.Error("no error and no key")
		}
	})
}

// TestVerifyHeadersBeforeTheBody: with X-Amz-Content-Sha256 the signature
// is verified from the headers alone; the body read through Pending.Body
// is hashed as it arrives, and a body that is not the declared one ends
// in InvalidSignatureException, counted as a failure of its client.
func TestVerifyHeadersBeforeTheBody(t *testing.T) {
	body := []byte(`{"clusters":["default"]}`)
	sum := sha256.Sum256(body)
	declared := func(secret string) *http.Request {
		return signedWith(t, "AKIDTENANTA", secret, "", body, signedAt, "X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	}
	c, _ := awsjson.ParseCredentials([]byte(testCredentials))
	v := awsjson.NewVerifier(c, awsjson.VerifierOptions{Now: func() time.Time { return signedAt }, Failures: awsjson.NewFailureBound(awsjson.FailureOptions{PairBurst: 1, PairRate: 0.001})})

	if _, e := v.VerifyHeaders(declared("not-the-secret"), "192.0.2.9:1"); e == nil || e.Code != "InvalidSignatureException" {
		t.Fatalf("wrong secret, from the headers: %v", e)
	}
	r := declared("secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY")
	p, e := v.VerifyHeaders(r, "192.0.2.1:1")
	if e != nil {
		t.Fatal(e)
	}
	got, err := io.ReadAll(p.Body(io.NopCloser(bytes.NewReader(body))))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("reading the declared body: %q %v", got, err)
	}
	if cred, e := v.VerifyBody(r, p, got, "192.0.2.1:1"); e != nil || cred.AccessKeyID != "AKIDTENANTA" {
		t.Fatalf("VerifyBody: %+v %v", cred, e)
	}

	r = declared("secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY")
	if p, e = v.VerifyHeaders(r, "192.0.2.2:1"); e != nil {
		t.Fatal(e)
	}
	_, err = io.ReadAll(p.Body(io.NopCloser(strings.NewReader(`{"clusters":["other"]}`))))
	var ae *awsjson.Error
	if !errors.As(err, &ae) || ae.Code != "InvalidSignatureException" {
		t.Fatalf("another body: %v", err)
	}
	if _, e := v.VerifyBody(r, p, []byte(`{"clusters":["other"]}`), "192.0.2.2:1"); e == nil {
		t.Fatal("another body verified")
	}
	if _, e := v.Admit("AKIDTENANTA", "192.0.2.2:1"); e == nil {
		t.Error("the failed body was not counted against its key and client (a burst of 1)")
	}
	if _, e := v.Admit("AKIDTENANTA", "192.0.2.1:1"); e != nil {
		t.Errorf("a key that verified from another address is refused there: %v", e)
	}
}

// TestAProofIsOfOneAddressAndEndsWithFailures: a key that verified from
// an address is admitted there as proven (from what the key remembers,
// without the bound's lock), not from another address; once it spends
// its failures from that address it is refused there, proven before or
// not, and its proof there ends after ProvenFor.
func TestAProofIsOfOneAddressAndEndsWithFailures(t *testing.T) {
	body := []byte(`{}`)
	now := signedAt
	c, _ := awsjson.ParseCredentials([]byte(testCredentials))
	v := awsjson.NewVerifier(c, awsjson.VerifierOptions{Now: func() time.Time { return now },
		Failures: awsjson.NewFailureBound(awsjson.FailureOptions{PairBurst: 3, PairRate: 0.001, ProvenFor: 10 * time.Minute})})
	const secret = "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY"
	verify := func(secret, remote string) *awsjson.Error {
		_, e := v.Verify(signed(t, "AKIDTENANTA", secret, "", body, now), body, remote)
		return e
	}
	admit := func(remote string) (bool, *awsjson.Error) {
		s, e := awsjson.ParseSigned(signed(t, "AKIDTENANTA", secret, "", body, now))
		if e != nil {
			t.Fatal(e)
		}
		return v.AdmitSigned(&s, remote)
	}
	if e := verify(secret, "192.0.2.1:1"); e != nil {
		t.Fatal(e)
	}
	for range 3 { // proven twice over: from the bound, then from the key
		if proven, e := admit("192.0.2.1:2"); !proven || e != nil {
			t.Fatalf("from the address it verified from: proven %v, %v", proven, e)
		}
		if e := verify(secret, "192.0.2.1:3"); e != nil {
			t.Fatal(e)
		}
	}
	if proven, e := admit("192.0.2.2:1"); proven || e != nil {
		t.Errorf("from another address: proven %v, %v; want unproven and admitted", proven, e)
	}
	for range 3 {
		if e := verify("not-the-secret", "192.0.2.1:4"); e == nil || e.Code != awsjson.CodeInvalidSignature {
			t.Fatalf("a wrong secret: %v", e)
		}
	}
	if proven, e := admit("192.0.2.1:5"); proven || e == nil || e.Code != "ThrottlingException" {
		t.Errorf("after spending its failures where it was proven: proven %v, %v; want ThrottlingException", proven, e)
	}
	if proven, e := admit("192.0.2.2:2"); proven || e != nil {
		t.Errorf("from another address after those failures: proven %v, %v; want unproven and admitted", proven, e)
	}

	if e := verify(secret, "192.0.2.3:1"); e != nil {
		t.Fatal(e)
	}
	now = now.Add(5 * time.Minute) // signed anew, within the skew
	if proven, _ := admit("192.0.2.3:2"); !proven {
		t.Error("5 minutes after verifying: not proven")
	}
	now = now.Add(6 * time.Minute)
	if proven, _ := admit("192.0.2.3:3"); proven {
		t.Error("11 minutes after verifying (ProvenFor 10 minutes): still proven")
	}
}
