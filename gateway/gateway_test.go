package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/yamlfield"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/quota"
)

const ecsTarget = "AmazonEC2ContainerServiceV20141113."

func sigv4(akid, region, service string) string {
	return "AWS4-HMAC-SHA256 Credential=" + akid + "/20261129/" + region + "/" + service +
		"/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=0123abcd"
}

// awsRequest sends a raw AWS JSON 1.1 request.
func awsRequest(t *testing.T, url, target, auth, body string, mutate ...func(*http.Request)) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for _, m := range mutate {
		m(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func postJSON(t *testing.T, url, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(t, resp.Body)
}

// remaining peeks at an ECS cluster-read bucket through the native API.
func remaining(t *testing.T, url, account, region string) int64 {
	t.Helper()
	status, body := postJSON(t, url+"/v1/take", `{"service":"ecs","account":"`+account+`","region":"`+region+`","category":"cluster-read","tokens":0}`)
	if status != 200 {
		t.Fatalf("peek: %d %s", status, body)
	}
	var r TakeResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r.Remaining
}

func TestThrottleResponseIsExactlyECS(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	auth := sigv4("AKIDEXACT", "us-east-1", "ecs")
	for range 50 {
		resp := awsRequest(t, srv.URL, ecsTarget+"ListClusters", auth, "{}")
		if resp.StatusCode != 200 {
			t.Fatalf("allowed request answered %d", resp.StatusCode)
		}
		if body := readAll(t, resp.Body); body != "{}" {
			t.Fatalf("allowed body = %q", body)
		}
		if resp.Header.Get("Content-Type") != "application/x-amz-json-1.1" || resp.Header.Get("X-Amzn-Requestid") == "" {
			t.Fatalf("allowed headers = %v", resp.Header)
		}
	}
	resp := awsRequest(t, srv.URL, ecsTarget+"DescribeClusters", auth, "{}",
		func(r *http.Request) { r.Header.Set("Content-Type", "application/x-amz-json-1.1; charset=utf-8") })
	if resp.StatusCode != 400 {
		t.Fatalf("throttled status = %d, want 400", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/x-amz-json-1.1" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := resp.Header.Get("X-Amzn-ErrorType"); got != "ThrottlingException" {
		t.Errorf("X-Amzn-ErrorType = %q", got)
	}
	if id := resp.Header.Get("X-Amzn-Requestid"); len(id) != 36 {
		t.Errorf("X-Amzn-Requestid = %q, want a UUID", id)
	}
	if body := readAll(t, resp.Body); body != `{"__type":"ThrottlingException","message":"Rate exceeded"}` {
		t.Errorf("body = %s", body)
	}
}

func TestCloudMapThrottleWireShape(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	postJSON(t, srv.URL+"/v1/take", `{"service":"cloudmap","account":"AKIDCM","region":"us-west-2","action":"DiscoverInstances","tokens":20000}`)
	resp := awsRequest(t, srv.URL, "Route53AutoNaming_v20170314.DiscoverInstances", sigv4("AKIDCM", "us-west-2", "servicediscovery"), "{}",
		func(r *http.Request) { r.Host = "data-servicediscovery.us-west-2.amazonaws.com" })
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "RequestLimitExceeded" {
		t.Fatalf("status %d, error type %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
	if body := readAll(t, resp.Body); body != `{"__type":"RequestLimitExceeded","message":"Rate exceeded"}` {
		t.Errorf("body = %s", body)
	}
}

// TestCloudMapControlPlaneThrottleIsThrottlingException: a throttled
// Cloud Map control-plane call answers ThrottlingException, its category's
// error, not the service's RequestLimitExceeded.
func TestCloudMapControlPlaneThrottleIsThrottlingException(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	postJSON(t, srv.URL+"/v1/take", `{"service":"cloudmap","account":"AKIDCP","region":"us-east-1","action":"ListServices","tokens":100}`)
	resp := awsRequest(t, srv.URL, "Route53AutoNaming_v20170314.RegisterInstance", sigv4("AKIDCP", "us-east-1", "servicediscovery"), "{}")
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ThrottlingException" {
		t.Fatalf("status %d, error type %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
	if body := readAll(t, resp.Body); body != `{"__type":"ThrottlingException","message":"Rate exceeded"}` {
		t.Errorf("body = %s", body)
	}
}

func TestBadAWSRequestsGet4xxAndConsumeNothing(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{MaxBodyBytes: 1024})
	good := sigv4("AKIDBAD", "us-east-1", "ecs")
	for _, tc := range []struct {
		name, target, auth, body string
		mutate                   func(*http.Request)
		status                   int
		code                     string
	}{
		{"unknown action", ecsTarget + "DescribeNothing", good, "{}", nil, 400, "UnknownOperationException"},
		{"unknown prefix", "AmazonSQS.SendMessage", good, "{}", nil, 400, "UnknownOperationException"},
		{"missing target", "", good, "{}", nil, 400, "UnknownOperationException"},
		{"malformed target", "DescribeClusters", good, "{}", nil, 400, "UnknownOperationException"},
		{"missing authorization", ecsTarget + "DescribeClusters", "", "{}", nil, 400, "MissingAuthenticationTokenException"},
		{"malformed authorization", ecsTarget + "DescribeClusters", "AWS4-HMAC-SHA256 Credential=AKIDBAD/2026/us-east-1", "{}", nil, 400, "IncompleteSignatureException"},
		{"wrong algorithm", ecsTarget + "DescribeClusters", "Basic dXNlcjpwYXNz", "{}", nil, 400, "IncompleteSignatureException"},
		{"scope of another service", ecsTarget + "DescribeClusters", sigv4("AKIDBAD", "us-east-1", "sqs"), "{}", nil, 400, "IncompleteSignatureException"},
		{"oversized body", ecsTarget + "DescribeClusters", good, `{"clusters":["` + strings.Repeat("x", 2000) + `"]}`, nil, 413, "SerializationException"},
		{"oversized chunked body", ecsTarget + "DescribeClusters", good, `{"clusters":["` + strings.Repeat("x", 2000) + `"]}`,
			func(r *http.Request) { r.ContentLength = -1 }, 413, "SerializationException"},
		{"malformed JSON", ecsTarget + "DescribeClusters", good, `{"clusters":`, nil, 400, "SerializationException"},
		{"JSON that is not an object", ecsTarget + "DescribeClusters", good, ` [1,2]`, nil, 400, "SerializationException"},
		{"wrong content type", ecsTarget + "DescribeClusters", good, "{}", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 400, "SerializationException"},
		{"JSON 1.0 content type", ecsTarget + "DescribeClusters", good, "{}", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-amz-json-1.0") }, 400, "SerializationException"},
		// Parser differentials: input two parsers could read two ways.
		{"two Credential parameters", ecsTarget + "DescribeClusters",
			"AWS4-HMAC-SHA256 Credential=AKIDBAD/20261129/us-east-1/ecs/aws4_request, Credential=AKIDOTHER/20261129/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab",
			"{}", nil, 400, "IncompleteSignatureException"},
		{"two Authorization headers", ecsTarget + "DescribeClusters", good, "{}",
			func(r *http.Request) { r.Header.Add("Authorization", sigv4("AKIDOTHER", "us-east-1", "ecs")) }, 400, "IncompleteSignatureException"},
		{"two X-Amz-Target headers", ecsTarget + "DescribeClusters", good, "{}",
			func(r *http.Request) { r.Header.Add("X-Amz-Target", ecsTarget+"ListClusters") }, 400, "UnknownOperationException"},
		{"duplicate JSON member", ecsTarget + "DescribeClusters", good, `{"clusters":["a"],"clusters":["b"]}`, nil, 400, "SerializationException"},
		{"invalid UTF-8 in JSON", ecsTarget + "DescribeClusters", good, "{\"clusters\":[\"\xff\"]}", nil, 400, "SerializationException"},
		{"two JSON values", ecsTarget + "DescribeClusters", good, `{} {}`, nil, 400, "SerializationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mutate []func(*http.Request)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			resp := awsRequest(t, srv.URL, tc.target, tc.auth, tc.body, mutate...)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tc.status || resp.Header.Get("X-Amzn-ErrorType") != tc.code {
				t.Fatalf("status %d code %q (%s); want %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body, tc.status, tc.code)
			}
			var e struct {
				Type    string `json:"__type"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != tc.code || e.Message == "" {
				t.Fatalf("body %q is not an AWS error with a message", body)
			}
		})
	}
	for _, akid := range []string{"AKIDBAD", "AKIDOTHER"} {
		if got := remaining(t, srv.URL, akid, "us-east-1"); got != 50 {
			t.Fatalf("bad requests consumed tokens of %s: %d of 50 left", akid, got)
		}
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET / = %d, want 405", resp.StatusCode)
	}
	// A GET of a path nothing serves is a 404 that says where things are.
	resp, err = http.Get(srv.URL + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	status, body := resp.StatusCode, string(b)
	if status != 404 || !strings.Contains(body, "no tollgate endpoint GET") || !strings.Contains(body, "/nothing") {
		t.Errorf("GET /nothing = %d %s, want 404 naming the endpoints", status, body)
	}
}

func TestAccessKeysOfOneAccountShareBuckets(t *testing.T) {
	ecs, _ := quota.Preset("ecs")
	cfg, err := quota.NewConfig([]*quota.Service{ecs}, nil, map[string]string{"AKIDONE": "123456789012", "AKIDTWO": "123456789012"})
	if err != nil {
		t.Fatal(err)
	}
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{Config: cfg})
	ok := 0
	for i := range 60 {
		akid := []string{"AKIDONE", "AKIDTWO"}[i%2]
		if awsRequest(t, srv.URL, ecsTarget+"DescribeClusters", sigv4(akid, "us-east-1", "ecs"), "{}").StatusCode == 200 {
			ok++
		}
	}
	if ok != 50 {
		t.Fatalf("two keys of one account admitted %d, want 50 together", ok)
	}
	if got := remaining(t, srv.URL, "123456789012", "us-east-1"); got != 0 {
		t.Fatalf("account bucket holds %d, want 0", got)
	}
}

func TestAllowedRequestsAreProxied(t *testing.T) {
	type seen struct {
		method, path, target, body, host string
	}
	got := make(chan seen, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.Header.Get("X-Amz-Target"), string(b), r.Host}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if r.Header.Get("X-Test-Upstream-Id") != "" {
			w.Header().Set("X-Amzn-Requestid", "upstream-id")
		}
		io.WriteString(w, `{"clusters":[]}`)
	}))
	defer upstream.Close()
	cfg, err := parseConfig("test.yaml", []byte("services:\n  - preset: ecs\n    upstream: "+upstream.URL+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newTestServer(t, limitertest.NewClock(), Options{Config: cfg})
	body := `{"clusters":["prod"],"include":["TAGS"]}`
	resp := awsRequest(t, srv.URL, ecsTarget+"DescribeClusters", sigv4("AKIDPROXY", "us-east-1", "ecs"), body,
		func(r *http.Request) { r.Header.Set("X-Test-Upstream-Id", "1") })
	if resp.StatusCode != 200 || readAll(t, resp.Body) != `{"clusters":[]}` {
		t.Fatalf("proxied answer %d", resp.StatusCode)
	}
	if ids := resp.Header.Values("X-Amzn-Requestid"); len(ids) != 1 || ids[0] != "upstream-id" {
		t.Errorf("request ids %q, want only the upstream's", ids)
	}
	s := <-got
	if s.method != "POST" || s.path != "/" || s.target != ecsTarget+"DescribeClusters" || s.body != body {
		t.Fatalf("upstream saw %+v", s)
	}
	if want := strings.TrimPrefix(srv.URL, "http://"); s.host != want {
		t.Errorf("upstream saw Host %q, want the client's %q (SigV4 signs it)", s.host, want)
	}

	// An upstream that sends no request id: tollgate's stands.
	resp = awsRequest(t, srv.URL, ecsTarget+"DescribeClusters", sigv4("AKIDPROXY", "us-east-1", "ecs"), body)
	<-got
	if ids := resp.Header.Values("X-Amzn-Requestid"); len(ids) != 1 || len(ids[0]) != 36 {
		t.Errorf("request ids %q, want tollgate's one UUID", ids)
	}
}

func TestNativeTake(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	req := `{"service":"ecs","account":"111122223333","region":"us-east-1","action":"DescribeClusters","tokens":50}`
	status, body := postJSON(t, srv.URL+"/v1/take", req)
	if status != 200 {
		t.Fatalf("take 50: %d %s", status, body)
	}
	var r TakeResponse
	json.Unmarshal([]byte(body), &r)
	want := TakeResponse{Allowed: true, Service: "ecs", Category: "cluster-read", Limit: LimitJSON{50, 20}, Remaining: 0, ResetAfterMs: 2500}
	if r != want {
		t.Fatalf("answer %+v, want %+v", r, want)
	}

	httpReq, _ := http.NewRequest("POST", srv.URL+"/v1/take", strings.NewReader(strings.Replace(req, `"tokens":50`, `"tokens":30`, 1)))
	resp, err := http.DefaultClient.Do(httpReq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Fatalf("throttled take: %d", resp.StatusCode)
	}
	if got := resp.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2 (1.5 s rounded up)", got)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != `"cluster-read";q=50;w=3` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	if got := resp.Header.Get("RateLimit"); got != `"cluster-read";r=0;t=3` {
		t.Errorf("RateLimit = %q", got)
	}
	json.NewDecoder(resp.Body).Decode(&r)
	if r.Allowed || r.RetryAfterMs != 1500 {
		t.Errorf("throttled answer %+v", r)
	}

	// Tokens default to 1; by category works too.
	clock.Advance(time.Second)
	status, body = postJSON(t, srv.URL+"/v1/take", `{"service":"ecs","account":"111122223333","region":"us-east-1","category":"cluster-read"}`)
	json.Unmarshal([]byte(body), &r)
	if status != 200 || r.Remaining != 19 {
		t.Fatalf("default single take: %d %+v", status, r)
	}
}

func TestNativeTakeErrorsNameTheField(t *testing.T) {
	_, srv := newTestServer(t, limitertest.NewClock(), Options{})
	for _, tc := range []struct{ body, field string }{
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"DescribeClusters","burst":3}`, "burst"},
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"DescribeClusters","tokens":"many"}`, "tokens"},
		{`{"service":"sqs","account":"1","region":"us-east-1","action":"SendMessage"}`, "service"},
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"Fly"}`, "action"},
		{`{"service":"ecs","account":"1","region":"us-east-1","category":"cluster-write"}`, "category"},
		{`{"service":"ecs","account":"1","region":"us-east-1"}`, "action"},
		{`{"service":"ecs","account":"","region":"us-east-1","action":"ListClusters"}`, "account"},
		{`{"service":"ecs","account":"1","region":"US EAST","action":"ListClusters"}`, "region"},
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters","tokens":-1}`, "tokens"},
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters","tokens":51}`, "tokens"},
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters","category":"cluster-read"}`, "action"},
		{`{"service":`, "service"},
		{`{} {}`, ""},
	} {
		status, body := postJSON(t, srv.URL+"/v1/take", tc.body)
		var e nativeError
		if err := json.Unmarshal([]byte(body), &e); err != nil || status != 400 || e.Field != tc.field || e.Error == "" {
			t.Errorf("%s → %d %s; want 400 naming field %q", tc.body, status, body, tc.field)
		}
	}
	if got := remaining(t, srv.URL, "1", "us-east-1"); got != 50 {
		t.Fatalf("rejected takes consumed tokens: %d left", got)
	}
	resp, _ := http.Get(srv.URL + "/v1/take")
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET /v1/take = %d, want 405", resp.StatusCode)
	}
}

// TestNativeErrorsSuggestTheName: a typo of a member, service, action or
// category gets the name it most likely meant, in a single take and in
// a batch.
func TestNativeErrorsSuggestTheName(t *testing.T) {
	_, srv := newTestServer(t, limitertest.NewClock(), Options{})
	const who = `"account":"1","region":"us-east-1"`
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/take", `{"service":"ecs",` + who + `,"action":"ListClusters","token":2}`, `token: unknown field (did you mean "tokens"?)`},
		{"/v1/take", `{"service":"ecss",` + who + `,"action":"ListClusters"}`, `(did you mean "ecs"?)`},
		{"/v1/take", `{"service":"ecs",` + who + `,"action":"CreateClustr"}`, `(did you mean "CreateCluster"?)`},
		{"/v1/take", `{"service":"ecs",` + who + `,"category":"cluster-raed"}`, `(did you mean "cluster-read"?)`},
		{"/v1/take/batch", `{"service":"ecs",` + who + `,"requests":[{"action":"ListClusters","tokes":1}]}`, `requests[0].tokes: unknown field (did you mean "tokens"?)`},
		{"/v1/take/batch", `{"service":"ecs",` + who + `,"request":[]}`, `(did you mean "requests"?)`},
		{"/v1/take/batch", `{"service":"ecs",` + who + `,"requests":[{"action":"DescribeClustrs"}]}`, `(did you mean "DescribeClusters"?)`},
	} {
		status, body := postJSON(t, srv.URL+tc.path, tc.body)
		var e nativeError
		if err := json.Unmarshal([]byte(body), &e); err != nil || status != 400 || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s %s → %d %s; want 400 with %s", tc.path, tc.body, status, body, tc.want)
		}
	}
	status, body := postJSON(t, srv.URL+"/v1/take", `{"service":"ecs",`+who+`,"action":"Fly"}`)
	if status != 400 || strings.Contains(body, "did you mean") {
		t.Errorf("an action near no name → %d %s; want 400 without a suggestion", status, body)
	}
}

func TestNativeBatch(t *testing.T) {
	_, srv := newTestServer(t, limitertest.NewClock(), Options{})
	status, body := postJSON(t, srv.URL+"/v1/take/batch", `{"service":"ecs","account":"111122223333","region":"us-east-1","requests":[
		{"action":"DescribeClusters","tokens":30},
		{"action":"ListClusters","tokens":20},
		{"action":"ListClusters"},
		{"action":"ListTasks","tokens":100},
		{"service":"cloudmap","action":"DiscoverInstances","tokens":20000}]}`)
	if status != 200 {
		t.Fatalf("batch: %d %s", status, body)
	}
	var resp BatchResponse
	json.Unmarshal([]byte(body), &resp)
	want := []bool{true, true, false, true, true}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results", len(resp.Results))
	}
	for i, w := range want {
		if resp.Results[i].Allowed != w {
			t.Errorf("result %d allowed = %v, want %v", i, resp.Results[i].Allowed, w)
		}
	}
	if resp.Results[4].Category != "discover-instances" || resp.Results[2].RetryAfterMs != 50 {
		t.Errorf("results %+v", resp.Results)
	}

	// One bad item rejects the batch before any take.
	status, body = postJSON(t, srv.URL+"/v1/take/batch", `{"service":"ecs","account":"2","region":"us-east-1","requests":[{"action":"ListClusters"},{"action":"Nope"}]}`)
	var e nativeError
	json.Unmarshal([]byte(body), &e)
	if status != 400 || e.Field != "requests[1].action" {
		t.Fatalf("bad batch: %d %s", status, body)
	}
	if got := remaining(t, srv.URL, "2", "us-east-1"); got != 50 {
		t.Fatalf("rejected batch consumed tokens: %d left", got)
	}
	if status, _ := postJSON(t, srv.URL+"/v1/take/batch", `{}`); status != 400 {
		t.Errorf("batch without requests: %d", status)
	}
}

func adminRequest(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(t, resp.Body)
}

func TestAdminNeedsToken(t *testing.T) {
	_, off := newTestServer(t, limitertest.NewClock(), Options{})
	if status, _ := adminRequest(t, "POST", off.URL+"/v1/admin/reload", "anything"); status != 404 {
		t.Errorf("admin without a configured token: %d, want 404", status)
	}
	_, on := newTestServer(t, limitertest.NewClock(), Options{AdminToken: "s3cret"})
	bucketURL := on.URL + "/v1/admin/bucket?service=ecs&account=1&region=us-east-1&action=ListClusters"
	for _, tok := range []string{"", "wrong", "s3cre"} {
		if status, _ := adminRequest(t, "GET", bucketURL, tok); status != 401 {
			t.Errorf("token %q: %d, want 401", tok, status)
		}
	}
	req, _ := http.NewRequest("GET", bucketURL, nil)
	req.Header.Set("Authorization", "bearer s3cret") // the scheme is case-insensitive
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("lower-case bearer scheme: %v %v", resp.StatusCode, err)
	}
	status, body := adminRequest(t, "GET", bucketURL, "s3cret")
	if status != 200 || !strings.Contains(body, `"key":"{ecs/1}:us-east-1:cluster-read"`) || !strings.Contains(body, `"remaining":50`) {
		t.Errorf("bucket: %d %s", status, body)
	}
	if status, _ := adminRequest(t, "GET", on.URL+"/v1/admin/bucket?service=ecs", "s3cret"); status != 400 {
		t.Errorf("bucket without account: %d, want 400", status)
	}
}

func TestReloadKeepsStateAndRejectsBadConfig(t *testing.T) {
	next := []string{
		"services:\n  - preset: ecs\noverrides:\n  - {service: ecs, account: \"1\", category: cluster-read, capacity: 100, refill_per_second: 40}\n",
		"services:\n  - preset: ecs\n    capacity: 3\n",
	}
	i := 0
	reload := func() (*quota.Config, error) {
		c, err := parseConfig("reload.yaml", []byte(next[i]))
		i++
		return c, err
	}
	reg := prometheus.NewRegistry()
	clock := limitertest.NewClock()
	g, srv := newTestServer(t, clock, Options{AdminToken: "tok", Reload: reload, Registry: reg})
	postJSON(t, srv.URL+"/v1/take", `{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters","tokens":50}`)

	status, body := adminRequest(t, "POST", srv.URL+"/v1/admin/reload", "tok")
	if status != 200 {
		t.Fatalf("reload: %d %s", status, body)
	}
	// State kept: the bucket is still empty, now under the 100/40 limit
	// (2.5 s of debt is 100 tokens at 40/s), and refills at 40/s.
	if got := remaining(t, srv.URL, "1", "us-east-1"); got != 0 {
		t.Fatalf("after reload the bucket holds %d, want 0 (state kept)", got)
	}
	clock.Advance(time.Second)
	if got := remaining(t, srv.URL, "1", "us-east-1"); got != 40 {
		t.Fatalf("after 1 s under the raised limit: %d, want 40", got)
	}

	status, body = adminRequest(t, "POST", srv.URL+"/v1/admin/reload", "tok")
	if status != 422 || !strings.Contains(body, "reload.yaml:3:5: services[0].capacity: unknown field") {
		t.Fatalf("bad reload: %d %s", status, body)
	}
	if _, l, _ := g.Config().Resolve("ecs", "1", "us-east-1", "ListClusters"); l.Capacity() != 100 {
		t.Fatalf("a rejected reload replaced the config: capacity %d", l.Capacity())
	}
	i = 1 // the bad config again, through Reload (what SIGHUP calls)
	var errs yamlfield.Errors
	if err := g.Reload(); err == nil || !errors.As(err, &errs) {
		t.Fatalf("Reload of a bad config: %v", err)
	}
}

func TestOperationsEndpoints(t *testing.T) {
	g, srv := newTestServer(t, limitertest.NewClock(), Options{})
	awsRequest(t, srv.URL, ecsTarget+"ListClusters", sigv4("AKIDOPS", "us-east-1", "ecs"), "{}")
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		if status, _ := adminRequest(t, "GET", srv.URL+path, ""); status != want {
			t.Errorf("GET %s = %d", path, status)
		}
	}
	_, metrics := adminRequest(t, "GET", srv.URL+"/metrics", "")
	for _, series := range []string{
		`tollgate_decisions_total{category="cluster-read",result="allowed",service="ecs"} 1`,
		"tollgate_decision_duration_seconds_bucket",
		"tollgate_buckets_tracked 1",
		`tollgate_http_requests_total{code="200",handler="aws",method="post"} 1`,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	g.SetReady(false)
	if status, _ := adminRequest(t, "GET", srv.URL+"/readyz", ""); status != 503 {
		t.Errorf("readyz while shutting down = %d", status)
	}
}

// An allowed request of a service with an in-process handler goes to it,
// told the account it was throttled as (whatever the client claimed); a
// throttled one never reaches it.
func TestHandlerAnswersAllowedRequests(t *testing.T) {
	var calls int
	var account, body string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		account = r.Header.Get(HeaderAccount)
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.Write([]byte(`{"InstancesRevision":7}`))
	})
	_, srv := newTestServer(t, limitertest.NewClock(), Options{Handlers: map[string]http.Handler{"cloudmap": h}})
	resp := awsRequest(t, srv.URL, "Route53AutoNaming_v20170314.DiscoverInstancesRevision", sigv4("AKIDH", "us-east-1", "servicediscovery"),
		`{"NamespaceName":"n","ServiceName":"s"}`, func(r *http.Request) { r.Header.Set(HeaderAccount, "forged") })
	got := readAll(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || got != `{"InstancesRevision":7}` || account != "AKIDH" || body != `{"NamespaceName":"n","ServiceName":"s"}` {
		t.Fatalf("status %d %q; handler saw account %q body %q", resp.StatusCode, got, account, body)
	}
	postJSON(t, srv.URL+"/v1/take", `{"service":"cloudmap","account":"AKIDH","region":"us-east-1","action":"DiscoverInstancesRevision","tokens":2999}`)
	resp = awsRequest(t, srv.URL, "Route53AutoNaming_v20170314.DiscoverInstancesRevision", sigv4("AKIDH", "us-east-1", "servicediscovery"), `{}`)
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "RequestLimitExceeded" || calls != 1 {
		t.Fatalf("drained: status %d %s, handler called %d times", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), calls)
	}
}
