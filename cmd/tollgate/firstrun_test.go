package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/servicequotas"
)

// awsCLI is the AWS CLI on PATH; the test is skipped without it, except
// under CI=true, which requires it.
func awsCLI(t *testing.T) string {
	t.Helper()
	aws, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the aws CLI is not installed; CI=true requires it")
		}
		t.Skip("the aws CLI is not installed (pip install awscli)")
	}
	return aws
}

// bucketOf reads a key's cluster-read bucket through the admin API.
func bucketOf(t *testing.T, addr, account string) (capacity, refill float64, remaining int64) {
	t.Helper()
	code, body := getBody(t, "http://"+addr+"/v1/admin/bucket?service=ecs&account="+account+"&region=us-east-1&action=DescribeClusters",
		"Authorization", "Bearer secret")
	var b struct {
		Bucket struct {
			Limit struct {
				Capacity float64 `json:"capacity"`
				Refill   float64 `json:"refill_per_second"`
			} `json:"limit"`
			Remaining int64 `json:"remaining"`
		} `json:"bucket"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &b) != nil {
		t.Fatalf("GET /v1/admin/bucket: %d %s", code, body)
	}
	return b.Bucket.Limit.Capacity, b.Bucket.Limit.Refill, b.Bucket.Remaining
}

// The acceptance, as a new user meets it: `tollgate serve` with
// no config and no flag (the README's first command; its data directory
// and admin token from the environment), a Cloud Map namespace and a
// Service Quotas increase request made with the AWS CLI, the request
// approved; the process killed with SIGKILL and started again with the
// same command: the namespace and the request are there and the approved
// burst still sizes the bucket. A bucket drained before a graceful
// restart (SIGTERM) is still drained after it.
func TestFirstCommandKeepsStateAcrossKill9AndRestart(t *testing.T) {
	aws := awsCLI(t)
	env := []string{"TOLLGATE_DATA_DIR=" + t.TempDir(), "TOLLGATE_ADMIN_TOKEN=secret"}
	s := startServerEnv(t, env)
	cli := func(args ...string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, aws, append(args, "--endpoint-url", "http://"+s.addr, "--output", "json")...)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AKIDFIRSTRUN", "AWS_SECRET_ACCESS_KEY=x", "AWS_DEFAULT_REGION=us-east-1",
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_MAX_ATTEMPTS=1", "NO_PROXY=*", "no_proxy=*")
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.Output()
		var v map[string]any
		if err != nil || json.Unmarshal(out, &v) != nil {
			t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return v
	}
	field := func(v map[string]any, path ...string) string {
		for _, p := range path[:len(path)-1] {
			v, _ = v[p].(map[string]any)
		}
		s, _ := v[path[len(path)-1]].(string)
		return s
	}
	restart := func() {
		t.Helper()
		s = startServerEnv(t, env)
	}

	if op := cli("servicediscovery", "create-http-namespace", "--name", "persist-test"); field(op, "OperationId") == "" {
		t.Fatalf("create-http-namespace answered %v", op)
	}
	// 200 is four times the default burst of 50: the default policy
	// leaves it to an operator.
	burst := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	req := cli("service-quotas", "request-service-quota-increase", "--service-code", "ecs", "--quota-code", burst, "--desired-value", "200")
	id := field(req, "RequestedQuota", "Id")
	if st := field(req, "RequestedQuota", "Status"); id == "" || st != "PENDING" {
		t.Fatalf("request-service-quota-increase answered %v, want PENDING", req)
	}
	adminPost(t, s.addr, "/v1/admin/servicequotas/requests/"+id+"/approve", `{"reason":"launch week"}`)

	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.cmd.Wait()
	restart()
	ns := cli("servicediscovery", "list-namespaces")
	if list, _ := ns["Namespaces"].([]any); len(list) != 1 || field(list[0].(map[string]any), "Name") != "persist-test" {
		t.Fatalf("after kill -9 list-namespaces answered %v", ns)
	}
	got := cli("service-quotas", "get-requested-service-quota-change", "--request-id", id)
	if st := field(got, "RequestedQuota", "Status"); st != "APPROVED" {
		t.Fatalf("after kill -9 the request is %v, want APPROVED", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c, _, _ := bucketOf(t, s.addr, "AKIDFIRSTRUN"); c != 200; c, _, _ = bucketOf(t, s.addr, "AKIDFIRSTRUN") {
		if time.Now().After(deadline) {
			t.Fatalf("after kill -9 the bucket's capacity is %v, want the approved 200", c)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Drain it with the refill slowed to one token in 100 s, so that the
	// restart's own time refills none to speak of.
	rate := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Rate)
	put, _ := http.NewRequest(http.MethodPut, "http://"+s.addr+"/v1/admin/servicequotas/applied",
		strings.NewReader(`{"account":"AKIDFIRSTRUN","region":"us-east-1","service_code":"ecs","quota_code":"`+rate+`","value":0.01}`))
	put.Header.Set("Authorization", "Bearer secret")
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT applied rate: %v %v", resp, err)
	}
	for _, r, _ := bucketOf(t, s.addr, "AKIDFIRSTRUN"); r != 0.01; _, r, _ = bucketOf(t, s.addr, "AKIDFIRSTRUN") {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("the bucket refills %v a second, want 0.01", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := take(t, s.addr, `{"service":"ecs","account":"AKIDFIRSTRUN","region":"us-east-1","action":"DescribeClusters","tokens":200}`); code != http.StatusOK {
		t.Fatalf("draining the bucket: %d %s", code, body)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if how := exitWithin(s, 60*time.Second); !strings.Contains(how, "exited: <nil>") {
		t.Fatalf("after SIGTERM the server %s", how)
	}
	restart()
	if c, r, left := bucketOf(t, s.addr, "AKIDFIRSTRUN"); c != 200 || r != 0.01 || left > 10 {
		t.Fatalf("after a graceful restart the drained bucket is capacity %v refill %v with %d left, want 200, 0.01 and at most 10", c, r, left)
	}
}
