package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/tollgate/tollgate/limiter/limitertest"
)

// ecsOperations lists the operations of the ECS SDK in go.mod: the
// client's methods Op(ctx, *OpInput, ...func(*Options)).
func ecsOperations(t *testing.T) []string {
	ctxType := reflect.TypeFor[context.Context]()
	var ops []string
	for m := range reflect.TypeOf(&ecs.Client{}).Methods() {
		ft := m.Type
		if ft.NumIn() == 4 && ft.In(1) == ctxType && ft.In(2).Kind() == reflect.Pointer && ft.In(2).Elem().Name() == m.Name+"Input" {
			ops = append(ops, m.Name)
		}
	}
	if len(ops) < 77 {
		t.Fatalf("found %d ECS operations by reflection: %v", len(ops), ops)
	}
	return ops
}

// Every operation the SDK can send is answered (no upstream: an empty
// body), none UnknownOperationException; the seed's misspelling too.
func TestEveryECSOperationIsAnswered(t *testing.T) {
	_, srv := newTestServer(t, limitertest.NewClock(), Options{})
	for _, op := range append(ecsOperations(t), "UpdateContainerInstancesStates") {
		resp := awsRequest(t, srv.URL, ecsTarget+op, sigv4("AKIDEVERY", "us-east-1", "ecs"), "{}")
		if body := readAll(t, resp.Body); resp.StatusCode != 200 || body != "{}" {
			t.Errorf("%s: %d %s %s", op, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body)
		}
	}
}

// With an upstream, an operation newer than the table is passed through
// under the default category (ecs: unlisted, 20 / 1 per second); without
// one, or with default_category none, it is refused.
func TestUnknownOperationPassesThroughWithUpstream(t *testing.T) {
	targets := make(chan string, 64)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		targets <- r.Header.Get("X-Amz-Target")
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		io.WriteString(w, `{"future":true}`)
	}))
	defer upstream.Close()
	cfg, err := parseConfig("test.yaml", []byte("services:\n  - preset: ecs\n    upstream: "+upstream.URL+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newTestServer(t, limitertest.NewClock(), Options{Config: cfg})
	const future = ecsTarget + "StartTheFutureOperation"
	for i := range 20 {
		resp := awsRequest(t, srv.URL, future, sigv4("AKIDFUTURE", "us-east-1", "ecs"), "{}")
		if body := readAll(t, resp.Body); resp.StatusCode != 200 || body != `{"future":true}` {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
		if got := <-targets; got != future {
			t.Fatalf("upstream saw %q", got)
		}
	}
	resp := awsRequest(t, srv.URL, future, sigv4("AKIDFUTURE", "us-east-1", "ecs"), "{}")
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ThrottlingException" {
		t.Fatalf("21st call in the unlisted bucket of 20: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}

	for _, yaml := range []string{"services:\n  - preset: ecs\n", "services:\n  - preset: ecs\n    upstream: " + upstream.URL + "\n    default_category: none\n"} {
		cfg, err := parseConfig("test.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		_, srv := newTestServer(t, limitertest.NewClock(), Options{Config: cfg})
		resp := awsRequest(t, srv.URL, future, sigv4("AKIDFUTURE", "us-east-1", "ecs"), "{}")
		body := readAll(t, resp.Body)
		if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "UnknownOperationException" || !strings.Contains(body, "default_category") {
			t.Errorf("%q: %d %s %s", yaml, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body)
		}
	}
}

// The native API resolves the seed's spelling and never suggests it.
func TestNativeTakeSuggestsTheSDKSpelling(t *testing.T) {
	_, srv := newTestServer(t, limitertest.NewClock(), Options{})
	status, body := postJSON(t, srv.URL+"/v1/take", `{"service":"ecs","account":"111122223333","region":"us-east-1","action":"UpdateContainerInstancesStatez"}`)
	if status != 400 || !strings.Contains(body, `did you mean \"UpdateContainerInstancesState\"`) || strings.Contains(body, "UpdateContainerInstancesStates") {
		t.Errorf("typo: %d %s", status, body)
	}
	status, body = postJSON(t, srv.URL+"/v1/take", `{"service":"ecs","account":"111122223333","region":"us-east-1","action":"UpdateContainerInstancesStates"}`)
	if status != 200 || !strings.Contains(body, `"category":"cluster-resource-modify"`) {
		t.Errorf("alias: %d %s", status, body)
	}
}

// SSM, KMS and Secrets Manager speak AWS JSON: serve answers them, and a
// throttled call gets the service's own error.
func TestAWSJSONPresetsThrottleWithTheirOwnError(t *testing.T) {
	cfg, err := parseConfig("test.yaml", []byte("services:\n  - preset: ssm\n  - preset: kms\n  - preset: secretsmanager\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newTestServer(t, limitertest.NewClock(), Options{Config: cfg})
	for _, tc := range []struct {
		target, signing string
		allowed         int
		message         string
	}{
		{"AmazonSSM.GetParameter", "ssm", 40, "Rate exceeded"},
		{"TrentService.CreateKey", "kms", 5, "You have exceeded the rate at which you may call KMS. Reduce the frequency of your calls."},
		{"secretsmanager.PutSecretValue", "secretsmanager", 50, "Rate exceeded"},
	} {
		for i := range tc.allowed {
			resp := awsRequest(t, srv.URL, tc.target, sigv4("AKIDJSON", "us-east-1", tc.signing), "{}")
			if body := readAll(t, resp.Body); resp.StatusCode != 200 {
				t.Fatalf("%s call %d: %d %s", tc.target, i, resp.StatusCode, body)
			}
		}
		resp := awsRequest(t, srv.URL, tc.target, sigv4("AKIDJSON", "us-east-1", tc.signing), "{}")
		body := readAll(t, resp.Body)
		if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ThrottlingException" || !strings.Contains(body, tc.message) {
			t.Errorf("%s call %d: %d %s %s", tc.target, tc.allowed+1, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body)
		}
	}
}
