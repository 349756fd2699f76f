package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/tollgate/tollgate/awsjson"
)

// newVerifiedServer is a gateway with --credentials: one long-term key,
// AKIDEARLY, whose secret is "right".
func newVerifiedServer(t *testing.T) *httptest.Server {
	t.Helper()
	creds, err := awsjson.ParseCredentials([]byte("[early]\naws_access_key_id = AKIDEARLY\naws_secret_access_key = right\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newTestServer(t, nil, Options{Verifier: awsjson.NewVerifier(creds, awsjson.VerifierOptions{})})
	return srv
}

// declaredRequest is a DescribeClusters with body, signed by the SDK's
// signer with secret, X-Amz-Content-Sha256 declaring the body's hash.
func declaredRequest(t *testing.T, url, secret string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", awsjson.ContentType)
	req.Header.Set("X-Amz-Target", ecsTarget+"DescribeClusters")
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDEARLY", SecretAccessKey: secret},
		req, hex.EncodeToString(sum[:]), "ecs", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// TestSignatureIsCheckedBeforeTheBody: with X-Amz-Content-Sha256 the
// signature is verified from the headers, so a request signed with a
// wrong secret is answered InvalidSignatureException while its declared
// body has not been sent at all; a good one is served once its body
// arrives, and a body other than the one declared is refused.
func TestSignatureIsCheckedBeforeTheBody(t *testing.T) {
	srv := newVerifiedServer(t)
	body := []byte(`{"clusters":["` + strings.Repeat("x", 1000) + `"]}`)

	req := declaredRequest(t, srv.URL, "wrong", body)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.URL.Host, len(body))
	req.Header.Write(&head)
	head.WriteString("\r\n")
	if _, err := conn.Write(head.Bytes()); err != nil { // the headers only
		t.Fatal(err)
	}
	// Generous: a server that waited for the body would wait forever
	// (httptest has no read timeout), not 30 s.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	got := readAll(t, resp.Body)
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "InvalidSignatureException" {
		t.Fatalf("wrong secret, body not sent: %d %s", resp.StatusCode, got)
	}

	resp, err = http.DefaultClient.Do(declaredRequest(t, srv.URL, "right", body))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp.Body); resp.StatusCode != 200 {
		t.Fatalf("right secret: %d %s", resp.StatusCode, got)
	}

	other := declaredRequest(t, srv.URL, "right", body)
	other.Body, other.ContentLength = nopCloser{bytes.NewReader(bytes.Replace(body, []byte("x"), []byte("y"), 1))}, int64(len(body))
	resp, err = http.DefaultClient.Do(other)
	if err != nil {
		t.Fatal(err)
	}
	got = readAll(t, resp.Body)
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "InvalidSignatureException" || !strings.Contains(got, "x-amz-content-sha256") {
		t.Fatalf("another body than the declared one: %d %s", resp.StatusCode, got)
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// TestUnsignedRequestsGetAWSsMessage: a request with no signature gets
// AWS's MissingAuthenticationTokenException, "Missing Authentication
// Token", with credentials and without.
func TestUnsignedRequestsGetAWSsMessage(t *testing.T) {
	_, plain := newTestServer(t, nil, Options{})
	for name, url := range map[string]string{"verified": newVerifiedServer(t).URL, "unverified": plain.URL} {
		resp := awsRequest(t, url, ecsTarget+"DescribeClusters", "", "{}")
		got := readAll(t, resp.Body)
		if resp.StatusCode != 400 || got != `{"__type":"MissingAuthenticationTokenException","message":"Missing Authentication Token"}` {
			t.Errorf("%s: %d %s", name, resp.StatusCode, got)
		}
	}
}

// TestUnsignedAmzHeaderIsRefused: an X-Amz-Target the signature does not
// cover cannot be swapped for another: the request is refused with
// AccessDeniedException naming the header.
func TestUnsignedAmzHeaderIsRefused(t *testing.T) {
	srv := newVerifiedServer(t)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader("{}"))
	req.Header.Set("Content-Type", awsjson.ContentType)
	sum := sha256.Sum256([]byte("{}"))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDEARLY", SecretAccessKey: "right"},
		req, hex.EncodeToString(sum[:]), "ecs", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", ecsTarget+"DeleteCluster") // after signing
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, resp.Body)
	if resp.StatusCode != 403 || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" || !strings.Contains(got, "not signed: x-amz-target") {
		t.Fatalf("X-Amz-Target added after signing: %d %s", resp.StatusCode, got)
	}
}
