package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"

	"github.com/tollgate/tollgate/internal/crashtest"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/servicequotas"
)

// durableConfig writes a config serving ECS, Cloud Map and Service
// Quotas, and an admin token file "secret"; it returns serve's arguments
// with data directory dir.
func durableConfig(t *testing.T, dir string) []string {
	t.Helper()
	etc := t.TempDir()
	cfg := filepath.Join(etc, "tollgate.yaml")
	tok := filepath.Join(etc, "token")
	if err := os.WriteFile(cfg, []byte("services:\n  - preset: ecs\n  - preset: cloudmap\n  - preset: servicequotas\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tok, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--config", cfg, "--admin-token-file", tok, "--data-dir", dir}
}

// sqClient is a Service Quotas client of a tollgate server.
func sqClient(addr, accessKey string) *sq.Client {
	return sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr),
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, "secret", ""), Retryer: aws.NopRetryer{}})
}

// adminPost posts body to an admin path with the token "secret".
func adminPost(t *testing.T, addr, path, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}

// The acceptance: a namespace, a registration and an approved
// increase request made against `tollgate serve` with a data directory;
// the process killed with SIGKILL and started again with the same
// command: all are there, the request's history has its reason, and the
// approved value still sizes the tenant's bucket.
func TestServeStateSurvivesKill9(t *testing.T) {
	args := durableConfig(t, t.TempDir())
	s := startServer(t, args...)
	ctx := context.Background()
	registerOne(t, sdClient(s.addr, "AKIDDURABLE"))
	burst := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	out, err := sqClient(s.addr, "AKIDDURABLE").RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{
		ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burst), DesiredValue: aws.Float64(100)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.RequestedQuota.Id)
	adminPost(t, s.addr, "/v1/admin/servicequotas/requests/"+id+"/approve", `{"reason":"launch week"}`)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.cmd.Wait()

	s = startServer(t, args...)
	if ids := discoverIDs(t, sdClient(s.addr, "AKIDDURABLE")); !slices.Equal(ids, []string{"web-1"}) {
		t.Fatalf("after kill -9 discovered %v", ids)
	}
	ns, err := sdClient(s.addr, "AKIDDURABLE").ListNamespaces(ctx, &sd.ListNamespacesInput{})
	if err != nil || len(ns.Namespaces) != 1 || aws.ToString(ns.Namespaces[0].Name) != "local" {
		t.Fatalf("after kill -9 ListNamespaces: %+v %v", ns, err)
	}
	got, err := sqClient(s.addr, "AKIDDURABLE").GetRequestedServiceQuotaChange(ctx, &sq.GetRequestedServiceQuotaChangeInput{RequestId: aws.String(id)})
	if err != nil || got.RequestedQuota.Status != "APPROVED" {
		t.Fatalf("after kill -9 request %s: %+v %v", id, got, err)
	}
	// The approved burst sizes the bucket: 100 tokens, not the file's 50.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := getBody(t, "http://"+s.addr+"/v1/admin/bucket?service=ecs&account=AKIDDURABLE&region=us-east-1&action=DescribeClusters",
			"Authorization", "Bearer secret")
		if code == http.StatusOK && strings.Contains(body, `"capacity":100`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after kill -9 the bucket is %d %s, want capacity 100", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A second tollgate on a data directory in use is refused at once, with
// the file named and what to do.
func TestServeRefusesADataDirInUse(t *testing.T) {
	dir := t.TempDir()
	args := durableConfig(t, dir)
	startServer(t, args...)
	code, _, stderr := runCmd(append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	want := filepath.Join(dir, "tollgate.db") + ": another process holds it open"
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "stop the other tollgate") {
		t.Fatalf("second serve: exit %d, stderr %s; want %q", code, stderr, want)
	}
}

// A few rounds of the crash harness: concurrent writers against a real
// server killed with SIGKILL at random moments; after each restart every
// acknowledged write is there, whole (bench/kill9.sh runs 100 rounds).
func TestKill9RoundsLoseNoAcknowledgedWrite(t *testing.T) {
	rep, err := crashtest.Run(t.Context(), crashtest.Options{Binary: binary, DataDir: t.TempDir(), Rounds: 3, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Acknowledged == 0 || rep.Lost != 0 || rep.FailedStarts != 0 {
		t.Fatalf("%+v", rep)
	}
}

// tenantView is what a tenant sees of the state: its namespaces and its
// requests' history.
func tenantView(t *testing.T, addr string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := sdClient(addr, "AKIDDURABLE").ListNamespaces(ctx, &sd.ListNamespacesInput{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sqClient(addr, "AKIDDURABLE").ListRequestedServiceQuotaChangeHistory(ctx, &sq.ListRequestedServiceQuotaChangeHistoryInput{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range ns.Namespaces {
		fmt.Fprintf(&b, "namespace %s %s\n", aws.ToString(n.Id), aws.ToString(n.Name))
	}
	for _, r := range h.RequestedQuotas {
		fmt.Fprintf(&b, "request %s %s %v %s\n", aws.ToString(r.Id), r.Status, aws.ToFloat64(r.DesiredValue), aws.ToString(r.QuotaCode))
	}
	return b.String()
}

// The move: export from the embedded store (and, the same, from
// the admin API while serving), import into Redis, and two nodes on that
// Redis answer the same namespaces and request history; then back from
// Redis into a new data directory.
func TestStateMovesBetweenDataDirAndRedis(t *testing.T) {
	dir := t.TempDir()
	args := durableConfig(t, dir)
	s := startServer(t, args...)
	ctx := context.Background()
	registerOne(t, sdClient(s.addr, "AKIDDURABLE"))
	burst := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	for i, v := range []float64{100, 120} {
		out, err := sqClient(s.addr, "AKIDDURABLE").RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{
			ServiceCode: aws.String("ecs"), QuotaCode: aws.String(burst), DesiredValue: aws.Float64(v)})
		if err != nil {
			t.Fatal(err)
		}
		verb := []string{"approve", "deny"}[i]
		adminPost(t, s.addr, "/v1/admin/servicequotas/requests/"+aws.ToString(out.RequestedQuota.Id)+"/"+verb, `{"reason":"r"}`)
	}
	want := tenantView(t, s.addr)
	if strings.Count(want, "\n") != 3 {
		t.Fatalf("before the move: %s", want)
	}
	code, served := getBody(t, "http://"+s.addr+"/v1/admin/state/export", "Authorization", "Bearer secret")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/admin/state/export: %d %s", code, served)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()

	file := filepath.Join(t.TempDir(), "state.jsonl")
	if code, _, stderr := runCmd("state", "export", "--data-dir", dir, "--file", file); code != 0 {
		t.Fatalf("state export: %d %s", code, stderr)
	}
	exported, _ := os.ReadFile(file)
	if string(exported) != served {
		t.Fatalf("the file's export and the served one differ:\n%s\n%s", exported, served)
	}
	rs := redistest.Start(t)
	if code, _, stderr := runCmd("state", "import", "--store", rs.URL(), "--file", file); code != 0 {
		t.Fatalf("state import into Redis: %d %s", code, stderr)
	}
	onRedis := append(slices.Clone(args[:len(args)-2]), "--store", rs.URL())
	a, b := startServer(t, onRedis...), startServer(t, onRedis...)
	for _, n := range []*server{a, b} {
		if got := tenantView(t, n.addr); got != want {
			t.Fatalf("a node on Redis answers\n%s\nwant\n%s", got, want)
		}
	}
	if code, _, stderr := runCmd("state", "import", "--store", rs.URL(), "--file", file); code != 1 || !strings.Contains(stderr, "import into an empty one") {
		t.Fatalf("a second import into the same Redis: %d %s", code, stderr)
	}

	back := filepath.Join(t.TempDir(), "back.jsonl")
	if code, _, stderr := runCmd("state", "export", "--store", rs.URL(), "--file", back); code != 0 {
		t.Fatalf("state export from Redis: %d %s", code, stderr)
	}
	dir2 := t.TempDir()
	if code, _, stderr := runCmd("state", "import", "--data-dir", dir2, "--file", back); code != 0 {
		t.Fatalf("state import into a data directory: %d %s", code, stderr)
	}
	c := startServer(t, append(slices.Clone(args[:len(args)-1]), dir2)...)
	if got := tenantView(t, c.addr); got != want {
		t.Fatalf("back from Redis, a node answers\n%s\nwant\n%s", got, want)
	}
}
