package gateway

// These tests repeat, on a real HTTP server on loopback, the attacks of
// a client that cannot sign on a tenant that can: slow bodies, a bad
// signer on the tenant's own address, bad signers from thousands of
// addresses. Loopback's 127.0.0.0/8 gives each attacker address its own
// source IP (the gateway trusts no X-Forwarded-For: RemoteAddr is the
// client).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/quota"
)

const (
	doorTenant    = "AKIDDOORTENANT"
	doorOther     = "AKIDDOOROTHER"
	doorTenantKey = "tenant-secret"
	doorCreds     = "[tenant]\naws_access_key_id = " + doorTenant + "\naws_secret_access_key = " + doorTenantKey +
		"\n[other]\naws_access_key_id = " + doorOther + "\naws_secret_access_key = other-secret\n"
)

// door is a gateway verifying SigV4, served by an http.Server set as
// package node sets it, on 127.0.0.1.
type door struct {
	g   *Gateway
	url string
}

func newDoor(t *testing.T, opts Options, fo awsjson.FailureOptions) *door {
	t.Helper()
	creds, err := awsjson.ParseCredentials([]byte(doorCreds))
	if err != nil {
		t.Fatal(err)
	}
	opts.Verifier = awsjson.NewVerifier(creds, awsjson.VerifierOptions{Failures: awsjson.NewFailureBound(fo)})
	// The tenant's own bucket never throttles it: what is measured is
	// whether it is answered, not its quota.
	var services []*quota.Service
	for _, name := range []string{"ecs", "cloudmap", "servicequotas"} {
		s, err := quota.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		services = append(services, s)
	}
	opts.Config, err = quota.NewConfig(services, []quota.Override{{
		Service: "ecs", Account: doorTenant, Category: "cluster-read", Limit: bucket.MustLimit(1_000_000, 100_000),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Limiter = memory.New(memory.Options{})
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-served })
	return &door{g: g, url: "http://" + ln.Addr().String()}
}

// clientFrom is an HTTP client whose connections come from local, a
// loopback address.
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
}

// signedCall is a DescribeClusters signed by the SDK's signer with key's
// secret.
func signedCall(t *testing.T, url, key, secret string) *http.Request {
	body := []byte(`{}`)
	r, err := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return nil
	}
	r.Header.Set("Content-Type", awsjson.ContentType)
	r.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.DescribeClusters")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret},
		r, hex.EncodeToString(sum[:]), "ecs", "us-east-1", time.Now()); err != nil {
		t.Error(err)
	}
	return r
}

// call sends r and returns its status and error code ("" on 200).
func call(c *http.Client, r *http.Request) (int, string) {
	resp, err := c.Do(r)
	if err != nil {
		return 0, err.Error()
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Amzn-Errortype")
}

// tenantCalls makes n signed calls through c, gap apart, and returns how
// many were answered 200, and the other answers seen.
func tenantCalls(t *testing.T, d *door, c *http.Client, n int, gap time.Duration) (served int, others map[string]int) {
	others = map[string]int{}
	for range n {
		time.Sleep(gap)
		status, code := call(c, signedCall(t, d.url, doorTenant, doorTenantKey))
		if status == http.StatusOK {
			served++
		} else {
			others[fmt.Sprint(status, " ", code)]++
		}
	}
	return served, others
}

// slowBodies keeps conns connections from the addresses local(i), each
// sending an AWS request with an Authorization header (another tenant's
// key id, whose secret it does not hold, every header signed and no
// X-Amz-Content-Sha256: what a signature can only be checked against once
// the body is read; an unknown key or an unsigned header is refused from
// the headers, before any body is read) and a Content-Length of declared, then a byte every 300 ms; a
// connection that is answered or cut reconnects after 100 ms. It returns
// once ctx ends and every connection has closed, with the number of
// times the gateway answered or cut one.
func slowBodies(ctx context.Context, url string, conns, declared int, local func(i int) string) *atomic.Int64 {
	var cut atomic.Int64
	var wg sync.WaitGroup
	host := url[len("http://"):]
	head := "POST / HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: " + awsjson.ContentType +
		"\r\nX-Amz-Target: AmazonEC2ContainerServiceV20141113.DescribeClusters" +
		"\r\nX-Amz-Date: " + time.Now().UTC().Format("20060102T150405Z") +
		"\r\nAuthorization: AWS4-HMAC-SHA256 Credential=" + doorOther + "/" + time.Now().UTC().Format("20060102") +
		"/us-east-1/ecs/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + fmt.Sprintf("%064d", 0) +
		"\r\nContent-Length: " + fmt.Sprint(declared) + "\r\n\r\n"
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local(i))}}
			for ctx.Err() == nil {
				slowBody(ctx, d, host, head, &cut)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	return &cut
}

// slowBody is one connection of slowBodies.
func slowBody(ctx context.Context, d *net.Dialer, host, head string, cut *atomic.Int64) {
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := io.WriteString(conn, head); err != nil {
		return
	}
	answered := make(chan struct{})
	go func() { // the gateway's answer, or its close, ends the connection
		defer close(answered)
		var b [1]byte
		conn.Read(b[:])
	}()
	defer func() { conn.Close(); <-answered }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-answered:
			cut.Add(1)
			return
		case <-time.After(300 * time.Millisecond):
			if _, err := conn.Write([]byte{'{'}); err != nil {
				cut.Add(1)
				return
			}
		}
	}
}

// waitHeld waits until the attack holds at least n bytes of the
// in-flight bound: the attack is in place before the tenant is measured.
func waitHeld(t *testing.T, d *door, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for d.g.inFlight.n.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the slow bodies hold %d bytes after 30 s, want %d: the attack never took hold", d.g.inFlight.n.Load(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slowBodyCase is one slow-body attack: conns connections from the
// addresses local(i), against a gateway with opts.
func slowBodyCase(t *testing.T, opts Options, conns int, local func(i int) string, held int64) {
	opts.BodyIdleTimeout = time.Second
	d := newDoor(t, opts, awsjson.FailureOptions{})
	tenant := clientFrom("127.0.0.1")
	if status, code := call(tenant, signedCall(t, d.url, doorTenant, doorTenantKey)); status != http.StatusOK {
		t.Fatalf("the tenant's first call, before the attack: %d %s", status, code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cuts := make(chan *atomic.Int64, 1)
	go func() { cuts <- slowBodies(ctx, d.url, conns, int(min(d.g.maxBody, ecsBodyBound))-1000, local) }()
	waitHeld(t, d, held)
	served, others := tenantCalls(t, d, tenant, 100, 40*time.Millisecond)
	cancel()
	cut := <-cuts
	t.Logf("%d slow connections: tenant served %d of 100 (others %v); the gateway answered or cut the slow bodies %d times; in flight at the end %d bytes",
		conns, served, others, cut.Load(), d.g.inFlight.n.Load())
	if served < 99 {
		t.Errorf("the tenant was served %d of 100 calls beside %d slow bodies (%v), want ≥ 99", served, conns, others)
	}
	if cut.Load() == 0 {
		t.Errorf("no slow body was ever cut")
	}
}

// TestSlowBodiesLeaveTheTenantServed: 40 connections from the tenant's
// own address, each declaring a body of nearly the most ECS takes and sending a byte every 300
// ms, reconnecting as they are cut, hold 4 KiB each (not what they
// declare), are cut after about the idle timeout, and leave the tenant
// on another connection served.
func TestSlowBodiesLeaveTheTenantServed(t *testing.T) {
	slowBodyCase(t, Options{}, 40, func(int) string { return "127.0.0.1" }, 30*bodyStep)
}

// TestManySlowBodiesFromOneAddressLeaveTheTenantServed: the bound scaled
// down so that a test's few hundred connections are the issue's
// thousand: 400 slow bodies from the tenant's own address fill that
// address's share (128 KiB of a 1 MiB bound); the tenant, proven by its
// first call, counts against its key's share and is served.
func TestManySlowBodiesFromOneAddressLeaveTheTenantServed(t *testing.T) {
	slowBodyCase(t, Options{MaxInFlightBytes: 1 << 20, MaxBodyBytes: 64 << 10}, 400,
		func(int) string { return "127.0.0.1" }, 100<<10)
}

// TestACrowdOfSlowBodiesLeavesTheTenantServed: 400 slow bodies from 400
// addresses fill all of the bound that unproven clients may use (768 KiB
// of 1 MiB); the tenant is served from the reserve.
func TestACrowdOfSlowBodiesLeavesTheTenantServed(t *testing.T) {
	slowBodyCase(t, Options{MaxInFlightBytes: 1 << 20, MaxBodyBytes: 64 << 10}, 400,
		func(i int) string { return fmt.Sprintf("127.0.%d.%d", 10+i/200, 1+i%200) }, 700<<10)
}

// attack runs workers goroutines that each send bad signatures through
// the client client(i) until ctx ends or req(i) is nil, and returns the
// answers they got by code. A request under way when ctx ends is let
// finish, not cut: its answer may be a refusal the failure delay holds
// back, which the server has counted already. answered, if not nil, is
// told each answer's code as it arrives.
func attack(ctx context.Context, t *testing.T, workers int, client func(i int) *http.Client, req func(i int) *http.Request,
	answered func(code string)) map[string]int {
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1))
				r := req(i)
				if r == nil {
					return
				}
				_, code := call(client(i), r)
				mu.Lock()
				codes[code]++
				mu.Unlock()
				if answered != nil {
					answered(code)
				}
			}
		}()
	}
	wg.Wait()
	return codes
}

// TestABadSignerOnTheTenantsAddressLeavesItServed: an unthrottled client
// on the tenant's own address signing with another key's id and a wrong
// secret, and with made-up keys, is refused before verification once
// its burst is spent; the tenant's correct signatures are all served.
func TestABadSignerOnTheTenantsAddressLeavesItServed(t *testing.T) {
	// A short failure delay: the attacker's refusals reach it soon after
	// the tenant's 200 calls (TestFailingKeyWaitsForItsAnswer has the
	// default's).
	d := newDoor(t, Options{FailureDelay: 5 * time.Millisecond}, awsjson.FailureOptions{})
	tenant := clientFrom("127.0.0.1")
	attacker := clientFrom("127.0.0.1")
	ctx, cancel := context.WithCancel(context.Background())
	codes := make(chan map[string]int, 1)
	refusedEarly := make(chan struct{}) // closed at the attacker's first ThrottlingException
	var once sync.Once
	go func() {
		codes <- attack(ctx, t, 4, func(int) *http.Client { return attacker }, func(i int) *http.Request {
			if i%2 == 0 {
				return signedCall(t, d.url, doorOther, "wrong-secret")
			}
			return signedCall(t, d.url, fmt.Sprintf("AKIDMADEUP%d", i), "x")
		}, func(code string) {
			if code == "ThrottlingException" {
				once.Do(func() { close(refusedEarly) })
			}
		})
	}()
	// The tenant calls until the server has refused the attacker before
	// verification (its burst spent) and 200 calls more: the server
	// counts a refusal when it makes it, before its delay ends.
	throttled := d.g.metrics.authFails.WithLabelValues("ThrottlingException")
	served, total, after, others := 0, 0, 0, map[string]int{}
	for deadline := time.Now().Add(time.Minute); after < 200 && time.Now().Before(deadline); {
		if testutil.ToFloat64(throttled) > 0 {
			after += 50
		}
		n, o := tenantCalls(t, d, tenant, 50, 0)
		served, total = served+n, total+50
		for k, v := range o {
			others[k] += v
		}
	}
	// The attacker goes on until it has had one of those refusals
	// itself, however late the loaded machine lets its delay end.
	if testutil.ToFloat64(throttled) > 0 {
		select {
		case <-refusedEarly:
		case <-time.After(time.Minute): // reported below
		}
	}
	cancel()
	got := <-codes
	counted := testutil.ToFloat64(throttled)
	t.Logf("tenant served %d of %d, %d of them after the first refusal before verification (others %v); the server refused %v before verification; the attacker's answers: %v",
		served, total, after, others, counted, got)
	if after < 200 {
		t.Errorf("in a minute the server refused the bad signer before verification %v times, and the tenant made %d calls after the first, want 200", counted, after)
	}
	if served != total {
		t.Errorf("the tenant was served %d of %d beside a bad signer on its address (%v), want all", served, total, others)
	}
	if got["ThrottlingException"] == 0 {
		t.Errorf("the server counted %v refusals before verification, but the bad signer received none within a minute: %v", counted, got)
	}
}

// TestBadSignersFromThousandsOfAddressesLeaveTheTenantServed: 3,000
// addresses, each a new connection, sign with the tenant's own access key
// id and a wrong secret (so its key counts as failing everywhere), past
// the verification budget; the tenant, proven from its address, is
// served through it.
func TestBadSignersFromThousandsOfAddressesLeaveTheTenantServed(t *testing.T) {
	// A budget of 50 verifications a second, of which the failing key
	// may use half: the flood (3,000 attempts, over 25 a second unless
	// they take two minutes) is shed, and the tenant must be served
	// through it.
	// A short failure delay: the 3,000 attempts are refused within
	// seconds (TestEveryRefusalFromTheHeadersWaits has the delay).
	d := newDoor(t, Options{FailureDelay: 10 * time.Millisecond}, awsjson.FailureOptions{VerifyRate: 50})
	tenant := clientFrom("127.0.0.1")
	if status, code := call(tenant, signedCall(t, d.url, doorTenant, doorTenantKey)); status != http.StatusOK {
		t.Fatalf("the tenant's first call: %d %s", status, code)
	}
	const addresses = 3000
	ctx, cancel := context.WithCancel(context.Background())
	codes := make(chan map[string]int, 1)
	go func() {
		codes <- attack(ctx, t, 6, func(i int) *http.Client {
			c := clientFrom(fmt.Sprintf("127.1.%d.%d", i/250, 1+i%250))
			c.Transport.(*http.Transport).DisableKeepAlives = true
			return c
		}, func(i int) *http.Request {
			if i > addresses {
				return nil
			}
			return signedCall(t, d.url, doorTenant, "wrong-secret")
		}, nil)
	}()
	// The tenant calls for as long as the addresses keep coming.
	served, total, others := 0, 0, map[string]int{}
	var got map[string]int
	for got == nil || total < 100 {
		select {
		case got = <-codes: // every address has tried
		default:
		}
		n, o := tenantCalls(t, d, tenant, 10, 0)
		served, total = served+n, total+10
		for k, v := range o {
			others[k] += v
		}
	}
	cancel()
	t.Logf("tenant served %d of %d (others %v); %d attacker addresses' answers: %v", served, total, others, addresses, got)
	if served*100 < total*99 {
		t.Errorf("the tenant was served %d of %d beside bad signers from %d addresses (%v), want ≥ 99 %%", served, total, addresses, others)
	}
	if got[awsjson.CodeInvalidSignature] == 0 || got["ServiceUnavailableException"] == 0 {
		t.Errorf("attackers' answers %v: want some verified (and failed), and some shed by the budget", got)
	}
}

// TestAWSBodiesAreBoundedPerAPI: each built-in API takes bodies up to
// its largest real request, and no more, declared or chunked.
func TestAWSBodiesAreBoundedPerAPI(t *testing.T) {
	d := newDoor(t, Options{}, awsjson.FailureOptions{})
	c := clientFrom("127.0.0.1")
	for _, tc := range []struct {
		target  string
		size    int
		chunked bool
		want    int
	}{
		{"AmazonEC2ContainerServiceV20141113.RegisterTaskDefinition", ecsBodyBound + 1, false, http.StatusRequestEntityTooLarge},
		{"AmazonEC2ContainerServiceV20141113.RegisterTaskDefinition", ecsBodyBound + 1, true, http.StatusRequestEntityTooLarge},
		{"AmazonEC2ContainerServiceV20141113.RegisterTaskDefinition", ecsBodyBound, false, http.StatusBadRequest}, // read, then its signature refused
		{"Route53AutoNaming_v20170314.RegisterInstance", smallBodyBound + 1, false, http.StatusRequestEntityTooLarge},
		{"Route53AutoNaming_v20170314.TagResource", smallBodyBound + 1, false, http.StatusBadRequest},
		{"ServiceQuotasV20190624.RequestServiceQuotaIncrease", smallBodyBound + 1, true, http.StatusRequestEntityTooLarge},
	} {
		body := bytes.Repeat([]byte{' '}, tc.size)
		var rd io.Reader = bytes.NewReader(body)
		if tc.chunked {
			rd = io.MultiReader(rd) // no length: sent chunked
		}
		r, _ := http.NewRequest(http.MethodPost, d.url+"/", rd)
		r.Header.Set("Content-Type", awsjson.ContentType)
		r.Header.Set("X-Amz-Target", tc.target)
		service := map[byte]string{'A': "ecs", 'R': "servicediscovery", 'S': "servicequotas"}[tc.target[0]]
		r.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+doorTenant+"/"+time.Now().UTC().Format("20060102")+"/us-east-1/"+service+
			"/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature="+fmt.Sprintf("%064d", 0))
		status, code := call(c, r)
		if status != tc.want {
			t.Errorf("%s, %d bytes (chunked %v): %d %s, want %d", tc.target, tc.size, tc.chunked, status, code, tc.want)
		}
	}
}

// TestFailingKeyWaitsForItsAnswer: once a key has spent its failures from
// an address, its next request is answered ThrottlingException only after
// four times the failure delay, on a closed connection, so a client that reconnects
// at once cannot flood the server; the tenant on the same address with
// its own key is answered at once meanwhile.
func TestFailingKeyWaitsForItsAnswer(t *testing.T) {
	const delay = time.Second
	d := newDoor(t, Options{FailureDelay: delay}, awsjson.FailureOptions{PairBurst: 1, PairRate: 0.001})
	c := clientFrom("127.0.0.1")
	if _, code := call(c, signedCall(t, d.url, doorOther, "not-the-secret")); code != "InvalidSignatureException" {
		t.Fatalf("the first bad signature: %s", code)
	}
	done := make(chan string, 1)
	start := time.Now()
	go func() {
		_, code := call(clientFrom("127.0.0.1"), signedCall(t, d.url, doorOther, "not-the-secret"))
		done <- code
	}()
	for len(d.g.delayed) < 1 { // the refusal is waiting, however slow the machine
		time.Sleep(10 * time.Millisecond)
	}
	if status, code := call(c, signedCall(t, d.url, doorTenant, doorTenantKey)); status != http.StatusOK {
		t.Fatalf("the tenant beside a waiting refusal: %d %s", status, code)
	}
	if code := <-done; code != "ThrottlingException" {
		t.Fatalf("the failing key's next request: %s, want ThrottlingException", code)
	}
	if took := time.Since(start); took < failingDelayFactor*delay {
		t.Errorf("the refusal came after %v, before %d times the failure delay of %v (the key has spent its failures)", took, failingDelayFactor, delay)
	}
}

// TestEveryRefusalFromTheHeadersWaits: a request refused from its
// headers is answered only after the failure delay, on a closed
// connection, from its first failure on (a made-up key, no signature at
// all), so that a crowd reconnecting at once cannot turn refusals into a
// flood; the waiting set is bounded (past it a refusal is answered at
// once), and a tenant is answered at once meanwhile.
func TestEveryRefusalFromTheHeadersWaits(t *testing.T) {
	const delay = 4 * time.Second
	d := newDoor(t, Options{FailureDelay: delay}, awsjson.FailureOptions{})
	d.g.delayed = make(chan struct{}, 2) // a waiting set of two
	unsigned := func() *http.Request {
		r := signedCall(t, d.url, doorTenant, doorTenantKey)
		r.Header.Del("Authorization")
		return r
	}
	type answer struct {
		code  string
		close bool
		took  time.Duration
	}
	refused := func(local string, r *http.Request) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			start := time.Now()
			resp, err := clientFrom(local).Do(r)
			if err != nil {
				out <- answer{code: err.Error()}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			out <- answer{resp.Header.Get("X-Amzn-Errortype"), resp.Close, time.Since(start)}
		}()
		return out
	}
	made := refused("127.0.0.2", signedCall(t, d.url, "AKIDMADEUP", "x"))
	none := refused("127.0.0.3", unsigned())
	for len(d.g.delayed) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	if status, code := call(clientFrom("127.0.0.1"), signedCall(t, d.url, doorTenant, doorTenantKey)); status != http.StatusOK {
		t.Fatalf("the tenant beside two waiting refusals: %d %s", status, code)
	}
	// A refusal from the headers (a made-up key: a wrong signature is
	// refused only once its body is read, and never waits) past the
	// waiting set: the server counts it shed from the set.
	past := <-refused("127.0.0.4", signedCall(t, d.url, "AKIDMADEUPTOO", "x"))
	if shed := testutil.ToFloat64(d.g.metrics.delayShed); past.code != awsjson.CodeUnrecognizedClient || shed != 1 || past.took >= delay {
		t.Errorf("a refusal past the waiting set: %s after %v, %v shed from the set, want %s at once, 1 shed",
			past.code, past.took, shed, awsjson.CodeUnrecognizedClient)
	}
	for name, want := range map[string]struct {
		got  <-chan answer
		code string
	}{"a made-up key": {made, awsjson.CodeUnrecognizedClient}, "no signature": {none, "MissingAuthenticationTokenException"}} {
		a := <-want.got
		if a.code != want.code || !a.close || a.took < delay {
			t.Errorf("%s, its first failure: %s (connection closed: %v) after %v, want %s on a closed connection after at least %v",
				name, a.code, a.close, a.took, want.code, delay)
		}
	}
}
