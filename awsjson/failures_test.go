package awsjson_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/awsjson"
)

// failureVerifier is a verifier of testCredentials with a failure bound
// of o, on the clock *now.
func failureVerifier(t *testing.T, now *time.Time, o awsjson.FailureOptions) (*awsjson.Verifier, *awsjson.FailureBound) {
	t.Helper()
	c, err := awsjson.ParseCredentials([]byte(testCredentials))
	if err != nil {
		t.Fatal(err)
	}
	f := awsjson.NewFailureBound(o)
	return awsjson.NewVerifier(c, awsjson.VerifierOptions{Now: func() time.Time { return *now }, Failures: f}), f
}

// attempt is one request as the gateway makes it: admitted, then
// verified. It returns the refusal's code, "" when verified.
func attempt(v *awsjson.Verifier, r *http.Request, remote string) string {
	cred, _ := awsjson.CredentialOf(r)
	if _, e := v.Admit(cred.AccessKeyID, remote); e != nil {
		return "refused:" + e.Code
	}
	if _, e := v.Verify(r, []byte(`{}`), remote); e != nil {
		return e.Code
	}
	return ""
}

// TestFailuresAreBoundedPerKeyAndAddress: a key that keeps failing from
// an address is refused there once its burst is spent; the same address
// with another key (a neighbour behind the same NAT), and the same key
// from another address, are heard; the refill lets it be heard again.
func TestFailuresAreBoundedPerKeyAndAddress(t *testing.T) {
	now := signedAt
	v, _ := failureVerifier(t, &now, awsjson.FailureOptions{PairBurst: 3, PairRate: 1})
	body := []byte(`{}`)
	bad := func() *http.Request { return signed(t, "AKIDTENANTA", "wrong", "", body, signedAt) }
	good := func() *http.Request { return signed(t, "AKIDTENANTB", "secret-b", "token-b", body, signedAt) }
	const shared = "198.51.100.7:1000"
	for i := range 3 {
		if got := attempt(v, bad(), shared); got != awsjson.CodeInvalidSignature {
			t.Fatalf("failure %d: %q, want InvalidSignatureException (burst not spent)", i, got)
		}
	}
	for i := range 100 {
		if got := attempt(v, bad(), shared); got != "refused:ThrottlingException" {
			t.Fatalf("after the burst, attempt %d: %q, want refused before verification", i, got)
		}
		if got := attempt(v, good(), "198.51.100.7:2000"); got != "" {
			t.Fatalf("the neighbour's correct signature from the same address, beside failure %d: %q", i, got)
		}
	}
	if got := attempt(v, bad(), "198.51.100.8:1000"); got != awsjson.CodeInvalidSignature {
		t.Errorf("the same key from another address: %q, want it verified (and failing)", got)
	}
	now = now.Add(time.Second)
	if got := attempt(v, bad(), shared); got != awsjson.CodeInvalidSignature {
		t.Errorf("a second later (1 failure/s refilled): %q, want it verified again", got)
	}
}

// TestMadeUpKeysShareOneCount: access key ids the credentials do not hold
// count as one key, so rotating made-up ids from an address is bounded
// like one key, and a real key from there is still heard.
func TestMadeUpKeysShareOneCount(t *testing.T) {
	now := signedAt
	v, f := failureVerifier(t, &now, awsjson.FailureOptions{PairBurst: 5})
	body := []byte(`{}`)
	refused := 0
	for i := range 1000 {
		r := signed(t, fmt.Sprintf("AKIDMADEUP%04d", i), "x", "", body, signedAt)
		if attempt(v, r, "203.0.113.9:1") == "refused:ThrottlingException" {
			refused++
		}
	}
	if refused != 995 {
		t.Errorf("%d of 1,000 made-up keys refused before verification, want all past the burst of 5", refused)
	}
	if got := attempt(v, signed(t, "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", "", body, signedAt), "203.0.113.9:2"); got != "" {
		t.Errorf("a real key from that address: %q", got)
	}
	if n := f.Tracked(); n != 2 {
		t.Errorf("%d pairs tracked, want 2 (the made-up keys as one, and the real key)", n)
	}
}

// TestFloodIsBoundedAndProvenTenantServed: failures from thousands of
// addresses cost at most the verification budget; a tenant that proved
// itself is verified through the flood every time, and a clean key's
// first request still finds the half of the budget a failing key cannot
// take.
func TestFloodIsBoundedAndProvenTenantServed(t *testing.T) {
	now := signedAt
	v, f := failureVerifier(t, &now, awsjson.FailureOptions{VerifyRate: 100, KeyBurst: 10, MaxClients: 1000})
	body := []byte(`{}`)
	tenant := func() *http.Request { return signed(t, "AKIDTENANTB", "secret-b", "token-b", body, signedAt) }
	if got := attempt(v, tenant(), "192.0.2.50:1"); got != "" {
		t.Fatalf("the tenant's first request: %q", got)
	}
	verified, served := 0, 0
	for sec := range 10 {
		for i := range 1000 {
			addr := fmt.Sprintf("10.%d.%d.%d:1", sec, i/250, i%250)
			switch attempt(v, signed(t, "AKIDTENANTA", "wrong", "", body, signedAt), addr) {
			case awsjson.CodeInvalidSignature:
				verified++
			case "refused:ServiceUnavailableException":
			default:
				t.Fatal("an attacker's request neither verified nor shed")
			}
			if i%100 == 0 {
				if attempt(v, tenant(), "192.0.2.50:1") == "" {
					served++
				}
			}
		}
		now = now.Add(time.Second)
	}
	// The budget: a burst of 100, then 100 a second, of which a failing
	// key may use half: at most 100 + 10 × 50 verifications (and at
	// least the half the rate gives it: the bound is not a wall).
	if verified > 600 || verified < 250 {
		t.Errorf("%d of 10,000 failing requests verified, want the budget's 250–600", verified)
	}
	if served != 100 {
		t.Errorf("the proven tenant: %d of 100 served through the flood", served)
	}
	if n := f.Tracked(); n > 1000 {
		t.Errorf("%d pairs tracked, bound 1,000", n)
	}
	clean := signed(t, "AKIDTENANTB", "secret-b", "token-b", body, signedAt)
	if got := attempt(v, clean, "192.0.2.70:1"); got != "" {
		t.Errorf("a clean key's first request from a fresh address during the flood: %q", got)
	}
}
