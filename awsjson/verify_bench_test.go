package awsjson_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/tollgate/tollgate/awsjson"
)

// BenchmarkVerify: one DescribeClusters signed by the Go SDK, verified
// (canonical) by the Verifier and (sdk-signer) as the Verifier did before
// it canonicalised by hand: the SDK's signer re-signing a copy of the
// signed headers, one signer per key caching its signing key. Both in
// one run, for BENCHMARKS.md.
func BenchmarkVerify(b *testing.B) {
	body := []byte(`{"clusters":["default"]}`)
	r := signed(b, "AKIDTENANTA", "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY", "", body, signedAt)
	b.Run("canonical", func(b *testing.B) {
		v := newVerifier(b, signedAt)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, e := v.Verify(r, body, "192.0.2.1:1"); e != nil {
				b.Fatal(e)
			}
		}
	})
	b.Run("canonical-10000-keys", func(b *testing.B) {
		// Keys taken in turn: each verification finds its key and
		// signing key out of the CPU's caches, as a server of many
		// tenants does.
		var file strings.Builder
		reqs := make([]*http.Request, 10000)
		for i := range reqs {
			id, secret := fmt.Sprintf("AKID%08d", i), fmt.Sprintf("secret-%08d", i)
			fmt.Fprintf(&file, "[k%d]\naws_access_key_id = %s\naws_secret_access_key = %s\n", i, id, secret)
			reqs[i] = signed(b, id, secret, "", body, signedAt)
		}
		c, err := awsjson.ParseCredentials([]byte(file.String()))
		if err != nil {
			b.Fatal(err)
		}
		v := awsjson.NewVerifier(c, awsjson.VerifierOptions{Now: func() time.Time { return signedAt }})
		for _, r := range reqs { // each key's signing key derived once
			if _, e := v.Verify(r, body, "192.0.2.1:1"); e != nil {
				b.Fatal(e)
			}
		}
		b.ReportAllocs()
		defer reportCPU(b)()
		i := 0
		for b.Loop() {
			if _, e := v.Verify(reqs[i%len(reqs)], body, "192.0.2.1:1"); e != nil {
				b.Fatal(e)
			}
			i++
		}
	})
	b.Run("sdk-signer", func(b *testing.B) {
		s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableHeaderHoisting = true })
		creds := aws.Credentials{AccessKeyID: "AKIDTENANTA", SecretAccessKey: "secret-a/K7MDENG+bPxRfiCYEXAMPLEKEY"}
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if !sdkSignatureMatches(s, r, body, creds) {
				b.Fatal("the SDK's signature differs")
			}
		}
	})
}

// reportCPU reports the process's CPU time per op (cpu-ns/op), which a
// loaded machine inflates far less than the wall time of ns/op: call it
// before the loop and its result after.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// sdkSignatureMatches is the verification the Verifier made before
// canonical.go: the request's signed headers copied onto a new request
// that the SDK's signer signs.
func sdkSignatureMatches(s *v4.Signer, r *http.Request, body []byte, creds aws.Credentials) bool {
	auth := r.Header.Get("Authorization")
	_, rest, _ := strings.Cut(auth, "SignedHeaders=")
	list, sig, _ := strings.Cut(rest, ", Signature=")
	c, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.Path, nil)
	for _, name := range strings.Split(list, ";") {
		switch name {
		case "host":
		case "content-length":
			c.ContentLength = r.ContentLength
		default:
			c.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	at, _ := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	sum := sha256.Sum256(body)
	if err := s.SignHTTP(context.Background(), creds, c, hex.EncodeToString(sum[:]), "ecs", "us-east-1", at); err != nil {
		return false
	}
	_, want, _ := strings.Cut(c.Header.Get("Authorization"), "Signature=")
	return hmac.Equal([]byte(want), []byte(sig))
}
