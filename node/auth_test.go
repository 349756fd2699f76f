package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/smithy-go"

	"github.com/tollgate/tollgate/internal/logtest"
)

const nodeCredentials = "[tenant]\naws_access_key_id = AKIDSIGNED\naws_secret_access_key = the-real-secret\n"

// bucketTokens reads a bucket's tokens through the admin API.
func bucketTokens(t *testing.T, n *Node, query string) float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+n.Addr().String()+"/v1/admin/bucket?"+query, nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b struct {
		Bucket struct {
			Remaining float64 `json:"remaining"`
		} `json:"bucket"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &b) != nil {
		t.Fatalf("admin bucket %s: %d %s", query, resp.StatusCode, body)
	}
	return b.Bucket.Remaining
}

func awsCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestSignaturesAreVerified: with --credentials, the Go SDK with the right
// secret is served by ECS, Cloud Map and Service Quotas; a wrong secret,
// an unknown key, a date 20 minutes old and a body changed after signing
// each get AWS's error, and none of them takes a token.
func TestSignaturesAreVerified(t *testing.T) {
	dir := t.TempDir()
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{
		// The signed key's cluster-read bucket refills one token in 1,000
		// s: its tokens count the takes, not the time between two reads
		// (at ECS's 20 a second a loaded -race run refilled one).
		ConfigPath: writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n  - preset: cloudmap\n  - preset: servicequotas\n"+
			"overrides:\n  - {service: ecs, account: AKIDSIGNED, category: cluster-read, capacity: 50, refill_per_second: 0.001}\n"),
		Credentials: writeFile(t, dir, "credentials", nodeCredentials),
		AdminToken:  "tok",
	})
	run(t, n, &logs)
	endpoint := aws.String("http://" + n.Addr().String())
	ctx := context.Background()
	creds := func(key, secret string) aws.CredentialsProvider {
		return credentials.NewStaticCredentialsProvider(key, secret, "")
	}
	ecsClient := func(key, secret string) *ecs.Client {
		return ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds(key, secret), Retryer: aws.NopRetryer{}})
	}
	const bucket = "service=ecs&account=AKIDSIGNED&region=us-east-1&category=cluster-read"
	before := bucketTokens(t, n, bucket)

	if _, err := ecsClient("AKIDSIGNED", "the-real-secret").DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err != nil {
		t.Fatalf("ECS with the right secret: %v", err)
	}
	if got := bucketTokens(t, n, bucket); got != before-1 {
		t.Fatalf("after one signed call the bucket has %v, want %v", got, before-1)
	}
	cm := sd.New(sd.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds("AKIDSIGNED", "the-real-secret"), Retryer: aws.NopRetryer{}})
	if _, err := cm.ListNamespaces(ctx, &sd.ListNamespacesInput{}); err != nil {
		t.Errorf("Cloud Map with the right secret: %v", err)
	}
	q := sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds("AKIDSIGNED", "the-real-secret"), Retryer: aws.NopRetryer{}})
	if _, err := q.ListServices(ctx, &sq.ListServicesInput{}); err != nil {
		t.Errorf("Service Quotas with the right secret: %v", err)
	}
	if _, err := sd.New(sd.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds("AKIDSIGNED", "nope"), Retryer: aws.NopRetryer{}}).
		ListNamespaces(ctx, &sd.ListNamespacesInput{}); !strings.HasPrefix(awsCode(err), "InvalidSignatureException") {
		t.Errorf("Cloud Map with a wrong secret: %s", awsCode(err))
	}

	if _, err := sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds("AKIDSIGNED", "nope"), Retryer: aws.NopRetryer{}}).
		ListServices(ctx, &sq.ListServicesInput{}); !strings.HasPrefix(awsCode(err), "InvalidSignatureException") {
		t.Errorf("Service Quotas with a wrong secret: %s", awsCode(err))
	}
	// A long-term key (no aws_session_token in the file) with a session
	// token, signed with the right secret: refused as AWS refuses a token
	// it did not issue.
	withToken := credentials.NewStaticCredentialsProvider("AKIDSIGNED", "the-real-secret", "a-token-of-anyones")
	for name, call := range map[string]func() error{
		"ECS": func() error {
			_, err := ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: withToken, Retryer: aws.NopRetryer{}}).
				DescribeClusters(ctx, &ecs.DescribeClustersInput{})
			return err
		},
		"Cloud Map": func() error {
			_, err := sd.New(sd.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: withToken, Retryer: aws.NopRetryer{}}).
				ListNamespaces(ctx, &sd.ListNamespacesInput{})
			return err
		},
		"Service Quotas": func() error {
			_, err := sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: withToken, Retryer: aws.NopRetryer{}}).
				ListServices(ctx, &sq.ListServicesInput{})
			return err
		},
	} {
		if got := awsCode(call()); got != "UnrecognizedClientException: The security token included in the request is invalid." {
			t.Errorf("%s, a long-term key with a session token: %s", name, got)
		}
	}

	signedBefore := bucketTokens(t, n, bucket)
	_, err := ecsClient("AKIDSIGNED", "a-wrong-secret").DescribeClusters(ctx, &ecs.DescribeClustersInput{})
	if got := awsCode(err); !strings.HasPrefix(got, "InvalidSignatureException: The request signature we calculated does not match") {
		t.Errorf("wrong secret: %s", got)
	}
	_, err = ecsClient("AKIDMADEUP", "whatever").DescribeClusters(ctx, &ecs.DescribeClustersInput{})
	if got := awsCode(err); got != "UnrecognizedClientException: The security token included in the request is invalid." {
		t.Errorf("unknown key: %s", got)
	}
	// Raw requests: one signed 20 minutes ago, one whose body changed.
	raw := func(body []byte, at time.Time, sendBody []byte) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, *endpoint+"/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.DescribeClusters")
		sum := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "AKIDSIGNED", SecretAccessKey: "the-real-secret"},
			req, hex.EncodeToString(sum[:]), "ecs", "us-east-1", at); err != nil {
			t.Fatal(err)
		}
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(sendBody)), int64(len(sendBody))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	body := []byte(`{"clusters":["default"]}`)
	if code, got := raw(body, time.Now().Add(-20*time.Minute), body); code != 400 || !strings.Contains(got, `"InvalidSignatureException"`) || !strings.Contains(got, "Signature expired") {
		t.Errorf("20 minutes old: %d %s", code, got)
	}
	if code, got := raw(body, time.Now(), []byte(`{"clusters":["others"]}`)); code != 400 || !strings.Contains(got, `"InvalidSignatureException"`) {
		t.Errorf("body changed after signing: %d %s", code, got)
	}
	if code, got := raw(body, time.Now(), body); code != 200 {
		t.Errorf("the same raw request, untouched: %d %s", code, got)
	}
	if got := bucketTokens(t, n, bucket); got != signedBefore-1 {
		t.Errorf("after four refused calls and one good one the bucket has %v, want %v (only the good one takes)", got, signedBefore-1)
	}
	if got := bucketTokens(t, n, "service=ecs&account=AKIDMADEUP&region=us-east-1&category=cluster-read"); got != 50 {
		t.Errorf("the made-up key's bucket has %v, want a full 50", got)
	}
}

// TestCredentialsFileIsReloaded: a key added to the file is accepted once
// the file is re-read; a broken file keeps the keys in use.
func TestCredentialsFileIsReloaded(t *testing.T) {
	dir := t.TempDir()
	var logs logtest.Buffer
	file := writeFile(t, dir, "credentials", nodeCredentials)
	n := newTestNode(t, &logs, Options{Credentials: file})
	run(t, n, &logs)
	call := func(key, secret string) error {
		c := ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + n.Addr().String()),
			Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""), Retryer: aws.NopRetryer{}})
		_, err := c.ListClusters(context.Background(), &ecs.ListClustersInput{})
		return err
	}
	if err := call("AKIDNEW", "new-secret"); !strings.HasPrefix(awsCode(err), "UnrecognizedClientException") {
		t.Fatalf("a key not yet in the file: %s", awsCode(err))
	}
	writeFile(t, dir, "credentials", nodeCredentials+"[new]\naws_access_key_id = AKIDNEW\naws_secret_access_key = new-secret\n")
	eventually(t, "the new key accepted", func() (bool, string) {
		err := call("AKIDNEW", "new-secret")
		return err == nil, awsCode(err)
	})
	writeFile(t, dir, "credentials", "[broken\n")
	if _, err := n.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "--credentials") {
		t.Errorf("Reload of a broken file = %v, want an error naming --credentials", err)
	}
	if err := call("AKIDNEW", "new-secret"); err != nil {
		t.Errorf("after a broken file, the keys in use: %s", awsCode(err))
	}
}

// TestUnverifiedWritableAPIsAreWarnedOf: without a credentials file, a
// node serving Service Quotas or Cloud Map says at start what that allows.
func TestUnverifiedWritableAPIsAreWarnedOf(t *testing.T) {
	dir := t.TempDir()
	var logs logtest.Buffer
	newTestNode(t, &logs, Options{ConfigPath: writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n  - preset: servicequotas\n")})
	if !strings.Contains(logs.String(), "SigV4 is not verified: servicequotas accept writes") {
		t.Errorf("no warning of the unverified API:\n%s", logs.String())
	}
	var quiet logtest.Buffer
	newTestNode(t, &quiet, Options{ConfigPath: writeFile(t, dir, "ecs.yaml", "services:\n  - preset: ecs\n")})
	if strings.Contains(quiet.String(), "SigV4 is not verified") {
		t.Errorf("warned with no writable API:\n%s", quiet.String())
	}
}

// TestAWSCLIAndBoto3AreVerified: the AWS CLI and boto3 (botocore's own
// signer) with the right secret are served by ECS, Cloud Map and Service
// Quotas, boto3 also with User-Agent and X-Amzn-Trace-Id signed; with a
// wrong secret they get InvalidSignatureException, and with an X-Amz-*
// header added after signing AccessDeniedException.
func TestAWSCLIAndBoto3AreVerified(t *testing.T) {
	aws, err := exec.LookPath("aws")
	python, perr := exec.LookPath("python3")
	if err != nil || perr != nil || exec.Command(python, "-c", "import boto3").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the aws CLI or boto3 is not installed; CI=true requires them")
		}
		t.Skip("the aws CLI or boto3 is not installed (pip install awscli boto3)")
	}
	dir := t.TempDir()
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{
		// The signed key's cluster-read bucket refills one token in 1,000
		// s: its tokens count the takes, not the time between two reads
		// (at ECS's 20 a second a loaded -race run refilled one).
		ConfigPath: writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n  - preset: cloudmap\n  - preset: servicequotas\n"+
			"overrides:\n  - {service: ecs, account: AKIDSIGNED, category: cluster-read, capacity: 50, refill_per_second: 0.001}\n"),
		Credentials: writeFile(t, dir, "credentials", nodeCredentials),
	})
	run(t, n, &logs)
	endpoint := "http://" + n.Addr().String()
	env := func(secret string) []string {
		return append(os.Environ(), "AWS_ACCESS_KEY_ID=AKIDSIGNED", "AWS_SECRET_ACCESS_KEY="+secret, "AWS_DEFAULT_REGION=us-east-1",
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_MAX_ATTEMPTS=1", "NO_PROXY=*", "no_proxy=*")
	}
	cli := func(secret string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, aws, append(args, "--endpoint-url", endpoint, "--output", "json")...)
		cmd.Env = env(secret)
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{{"ecs", "describe-clusters"}, {"servicediscovery", "list-namespaces"}, {"service-quotas", "list-services"}} {
		if out, err := cli("the-real-secret", args...); err != nil {
			t.Errorf("aws %v with the right secret: %v\n%s", args, err, out)
		}
	}
	if out, err := cli("wrong", "ecs", "describe-clusters"); err == nil || !strings.Contains(out, "(InvalidSignatureException)") {
		t.Errorf("aws ecs describe-clusters with a wrong secret: %v\n%s", err, out)
	}
	// boto3 as it is, and (ua) set to sign User-Agent and X-Amzn-Trace-Id
	// as AWS SDK for Java v1 signs User-Agent (botocore leaves both out
	// unless its SIGNED_HEADERS_BLACKLIST is emptied); (unsigned) with an
	// X-Amz-* header added after signing.
	script := `
import sys, boto3, botocore, botocore.auth
secret, mode = sys.argv[2], sys.argv[3]
if mode == "ua":
    botocore.auth.SIGNED_HEADERS_BLACKLIST[:] = ["expect"]
for svc, call in (("ecs", "list_clusters"), ("servicediscovery", "list_namespaces"), ("service-quotas", "list_services")):
    c = boto3.client(svc, endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="AKIDSIGNED", aws_secret_access_key=secret)
    def before_sign(request, **kwargs):
        request.headers["X-Amzn-Trace-Id"] = "Root=1-67891233-abcdef012345678912345678"
    def before_send(request, **kwargs):
        if mode == "ua":
            auth = request.headers["Authorization"]
            auth = auth.decode() if isinstance(auth, bytes) else auth
            assert "user-agent;" in auth and "x-amzn-trace-id" in auth, auth
        if mode == "unsigned":
            request.headers["X-Amz-Evil"] = "1"
    c.meta.events.register("before-sign", before_sign)
    c.meta.events.register("before-send", before_send)
    try:
        getattr(c, call)()
        print(svc, "ok")
    except botocore.exceptions.ClientError as e:
        print(svc, e.response["Error"]["Code"])
`
	for _, tc := range []struct{ secret, mode, want string }{
		{"the-real-secret", "plain", "ecs ok\nservicediscovery ok\nservice-quotas ok\n"},
		{"wrong", "plain", "ecs InvalidSignatureException\nservicediscovery InvalidSignatureException\nservice-quotas InvalidSignatureException\n"},
		{"the-real-secret", "ua", "ecs ok\nservicediscovery ok\nservice-quotas ok\n"},
		{"wrong", "ua", "ecs InvalidSignatureException\nservicediscovery InvalidSignatureException\nservice-quotas InvalidSignatureException\n"},
		{"the-real-secret", "unsigned", "ecs AccessDeniedException\nservicediscovery AccessDeniedException\nservice-quotas AccessDeniedException\n"},
	} {
		secret, want := tc.secret, tc.want
		cmd := exec.Command(python, "-c", script, endpoint, secret, tc.mode)
		cmd.Env = env(secret)
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != want {
			t.Errorf("boto3 (%s) with secret %q: %v\n%s\nwant\n%s", tc.mode, secret, err, out, want)
		}
	}
}
