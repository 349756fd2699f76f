package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/quota"
)

// peek reads an ECS bucket's tokens through the native API, taking none.
func peek(t *testing.T, url, account, category string) int64 {
	t.Helper()
	status, body := postJSON(t, url+"/v1/take", `{"service":"ecs","account":"`+account+`","region":"us-east-1","category":"`+category+`","tokens":0}`)
	if status != 200 {
		t.Fatalf("peek %s: %d %s", category, status, body)
	}
	var r TakeResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r.Remaining
}

// TestRunTaskOnFargateTakesFromThreeBuckets: ten RunTasks of 10 Fargate
// tasks empty the On-Demand tasks bucket (100); the eleventh is throttled
// by it and takes nothing from ECS's bucket or Fargate's RunTask bucket;
// a RunTask of one task then still fails, and one on EC2 passes.
func TestRunTaskOnFargateTakesFromThreeBuckets(t *testing.T) {
	clock := limitertest.NewClock() // frozen: the whole test is one instant
	_, srv := newTestServer(t, clock, Options{})
	auth := sigv4("AKIDFARGATE", "us-east-1", "ecs")
	run := func(body string) (int, string) {
		resp := awsRequest(t, srv.URL, ecsTarget+"RunTask", auth, body)
		return resp.StatusCode, readAll(t, resp.Body)
	}
	for i := range 10 {
		if status, body := run(`{"taskDefinition":"web","launchType":"FARGATE","count":10}`); status != 200 {
			t.Fatalf("RunTask %d of 10 tasks: %d %s", i+1, status, body)
		}
	}
	status, body := run(`{"taskDefinition":"web","launchType":"FARGATE","count":10}`)
	if status != 400 || body != `{"__type":"ThrottlingException","message":"Rate exceeded"}` {
		t.Fatalf("11th RunTask of 10 tasks: %d %s; want 400 ThrottlingException", status, body)
	}
	for cat, want := range map[string]int64{
		"cluster-resource-modify":  90,
		quota.FargateRunTask:       10,
		quota.FargateOnDemandTasks: 0,
		quota.FargateSpotTasks:     100,
	} {
		if got := peek(t, srv.URL, "AKIDFARGATE", cat); got != want {
			t.Errorf("%s holds %d after 10 allowed RunTasks and a throttled one, want %d", cat, got, want)
		}
	}
	// Spot has its own bucket; EC2 takes from ECS's only.
	if status, body := run(`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE_SPOT","weight":1}],"count":10}`); status != 200 {
		t.Fatalf("RunTask on Spot: %d %s", status, body)
	}
	if status, body := run(`{"launchType":"EC2","count":10}`); status != 200 {
		t.Fatalf("RunTask on EC2: %d %s", status, body)
	}
	if got := peek(t, srv.URL, "AKIDFARGATE", quota.FargateRunTask); got != 9 {
		t.Errorf("fargate-run-task holds %d after an EC2 RunTask, want 9 (untouched by EC2)", got)
	}
	// Half a second refills 10 tasks: one RunTask of 1 task passes.
	clock.Advance(500_000_000)
	if status, body := run(`{"launchType":"FARGATE","count":1}`); status != 200 {
		t.Fatalf("RunTask of 1 task after 0.5 s: %d %s", status, body)
	}
}

// TestRunTaskCountOneFitsWhereTenDoNot: at one instant, with one task
// left in the On-Demand bucket, a RunTask of 10 tasks is throttled by it
// and one of 1 task passes.
func TestRunTaskCountOneFitsWhereTenDoNot(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	auth := sigv4("AKIDFARGATE2", "us-east-1", "ecs")
	run := func(count string) int {
		resp := awsRequest(t, srv.URL, ecsTarget+"RunTask", auth, `{"launchType":"FARGATE","count":`+count+`}`)
		readAll(t, resp.Body)
		return resp.StatusCode
	}
	for range 9 {
		if s := run("10"); s != 200 {
			t.Fatalf("RunTask count 10: %d", s)
		}
	}
	for range 9 {
		run("1") // 9 tasks: 1 left
	}
	if s := run("10"); s != 400 {
		t.Fatalf("count 10 with 1 task left: %d, want 400", s)
	}
	if s := run("1"); s != 200 {
		t.Fatalf("count 1 with 1 task left: %d, want 200", s)
	}
}

func TestRunTaskInvalidParameters(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	auth := sigv4("AKIDBADRUN", "us-east-1", "ecs")
	for _, tc := range []struct{ body, code, msg string }{
		{`{"launchType":"FARGATE","count":11}`, "InvalidParameterException", "count must be between 1 and 10"},
		{`{"count":0}`, "InvalidParameterException", "count"},
		{`{"count":"x"}`, "SerializationException", "count"},
		{`{"launchType":"FARGATE","capacityProviderStrategy":[{"capacityProvider":"FARGATE"}]}`, "InvalidParameterException", "both"},
	} {
		resp := awsRequest(t, srv.URL, ecsTarget+"RunTask", auth, tc.body)
		body := readAll(t, resp.Body)
		if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("RunTask %s: %d %s %s; want 400 %s mentioning %q", tc.body, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body, tc.code, tc.msg)
		}
	}
	if got := peek(t, srv.URL, "AKIDBADRUN", "cluster-resource-modify"); got != 100 {
		t.Errorf("refused RunTasks took tokens: cluster-resource-modify holds %d, want 100", got)
	}
}

func TestSDKRunTaskOnFargateIsThrottledByTasks(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	client := ecsClient(srv.URL, "AKIDSDKFARGATE", "us-east-1", aws.NopRetryer{})
	ctx := context.Background()
	in := func(count int32) *ecs.RunTaskInput {
		return &ecs.RunTaskInput{TaskDefinition: aws.String("web:1"), LaunchType: ecstypes.LaunchTypeFargate, Count: aws.Int32(count)}
	}
	for i := range 10 {
		if _, err := client.RunTask(ctx, in(10)); err != nil {
			t.Fatalf("RunTask %d of 10 tasks: %v", i+1, err)
		}
	}
	_, err := client.RunTask(ctx, in(10))
	if code := errorCode(t, err); code != "ThrottlingException" {
		t.Fatalf("11th RunTask of 10 tasks: %v; want ThrottlingException", err)
	}
	_, err = client.RunTask(ctx, in(11))
	if code := errorCode(t, err); code != "InvalidParameterException" {
		t.Fatalf("RunTask of 11 tasks: %v; want InvalidParameterException", err)
	}
	clock.Advance(50_000_000) // 50 ms: one task's worth of refill
	if _, err := client.RunTask(ctx, in(1)); err != nil {
		t.Fatalf("RunTask of 1 task after a refill of 1: %v", err)
	}
	if _, err := client.RunTask(ctx, in(1)); errorCode(t, err) != "ThrottlingException" {
		t.Fatalf("a second RunTask of 1 task: %v; want ThrottlingException", err)
	}
	strategy := &ecs.RunTaskInput{TaskDefinition: aws.String("web:1"), Count: aws.Int32(10),
		CapacityProviderStrategy: []ecstypes.CapacityProviderStrategyItem{{CapacityProvider: aws.String("FARGATE_SPOT"), Weight: 1}}}
	if _, err := client.RunTask(ctx, strategy); err != nil {
		t.Fatalf("RunTask on FARGATE_SPOT, whose bucket is full: %v", err)
	}
}

// TestNativeTakeWithARunTaskRequest: /v1/take with the RunTask body takes
// from the buckets the AWS front door would, all or none, and lists them.
func TestNativeTakeWithARunTaskRequest(t *testing.T) {
	clock := limitertest.NewClock()
	_, srv := newTestServer(t, clock, Options{})
	take := `{"service":"ecs","account":"444455556666","region":"us-east-1","action":"RunTask","request":{"launchType":"FARGATE","count":10}}`
	for i := range 10 {
		if status, body := postJSON(t, srv.URL+"/v1/take", take); status != 200 {
			t.Fatalf("take %d: %d %s", i+1, status, body)
		}
	}
	status, body := postJSON(t, srv.URL+"/v1/take", take)
	if status != 429 {
		t.Fatalf("11th take: %d %s, want 429", status, body)
	}
	var r ChargedTakeResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.Category != quota.FargateOnDemandTasks || r.Remaining != 0 || r.RetryAfterMs != 500 || len(r.Buckets) != 3 {
		t.Fatalf("11th take: %s; want refused by fargate-on-demand-tasks, 500 ms to wait, 3 buckets", body)
	}
	for i, want := range []struct {
		cat       string
		remaining int64
	}{{"cluster-resource-modify", 90}, {quota.FargateRunTask, 10}, {quota.FargateOnDemandTasks, 0}} {
		if b := r.Buckets[i]; b.Category != want.cat || b.Remaining != want.remaining || b.Allowed {
			t.Errorf("bucket %d: %+v, want %s with %d left, refused", i, b, want.cat, want.remaining)
		}
	}
	if got := peek(t, srv.URL, "444455556666", "cluster-resource-modify"); got != 90 {
		t.Errorf("cluster-resource-modify holds %d after the refused take, want 90", got)
	}
	for _, tc := range []struct{ body, field, msg string }{
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"RunTask","request":{"count":11}}`, "request", "InvalidParameterException"},
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"RunTask","tokens":3,"request":{}}`, "tokens", "not both"},
		{`{"service":"ecs","account":"1","region":"us-east-1","action":"StopTask","request":{}}`, "request", "does not depend"},
		{`{"service":"ecs","account":"1","region":"us-east-1","category":"fargate-run-task","request":{}}`, "request", "needs an action"},
	} {
		status, body := postJSON(t, srv.URL+"/v1/take", tc.body)
		if status != 400 || !strings.Contains(body, `"field":"`+tc.field+`"`) || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: %d %s; want 400 on field %s mentioning %q", tc.body, status, body, tc.field, tc.msg)
		}
	}
	batch := `{"service":"ecs","account":"1","region":"us-east-1","requests":[{"action":"RunTask","request":{}}]}`
	if status, body := postJSON(t, srv.URL+"/v1/take/batch", batch); status != 400 || !strings.Contains(body, "request") {
		t.Errorf("a batch item with a request: %d %s; want 400", status, body)
	}
}
