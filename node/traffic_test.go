package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool/traffic"
)

func TestMain(m *testing.M) { testservice.Main(m) }

// trafficConfig is a config running the test service as "hello" at
// host hello.example, with env VERSION=version and the given traffic block lines.
func trafficConfig(bin, version, traffic string) string {
	c := "services:\n  - name: hello\n    route: {host: hello.example}\n    autoscale:\n" +
		"      command: [" + bin + "]\n      env: {VERSION: " + version + "}\n      readiness: {path: /healthz}\n      min_instances: 1\n"
	if traffic != "" {
		c += "      traffic:\n" + traffic
	}
	return c
}

// revisionOf sends GET /env to host hello.example (with a tag header
// when tag is not "", or, when tag is "host:T", to T---hello.example)
// and returns the K_REVISION of the instance that answered, or the
// status and body when it did not answer 200.
func revisionOf(t *testing.T, n *Node, tag string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+n.Addr().String()+"/env", nil)
	req.Host = "hello.example"
	if h, ok := strings.CutPrefix(tag, "host:"); ok {
		req.Host = h + "---hello.example"
	} else if tag != "" {
		req.Header.Set("X-Tollgate-Revision-Tag", tag)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env map[string]string
	if resp.StatusCode != 200 || json.Unmarshal(body, &env) != nil {
		return resp.Status + " " + string(body)
	}
	return env["K_REVISION"]
}

// admin sends an authenticated admin request and returns the status and
// body.
func admin(t *testing.T, n *Node, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+n.Addr().String()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTrafficThroughConfigAndAdmin runs real instances: a reload with a
// new command and a traffic block keeps hello-00001 on all untagged
// traffic while the tag reaches hello-00002; a reload naming a revision
// that does not run is refused at its file:line:col and changes nothing;
// the admin endpoint splits 90/10 and lists the revisions.
func TestTrafficThroughConfigAndAdmin(t *testing.T) {
	bin := testservice.Build(t)
	dir := t.TempDir()
	path := writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "one", ""))
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: path, AdminToken: "tok"})
	run(t, n, &logs)
	waitRevision := func(tag, want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for got := revisionOf(t, n, tag); got != want; got = revisionOf(t, n, tag) {
			if time.Now().After(deadline) {
				t.Fatalf("tag %q reaches %q, want %s\n%s", tag, got, want, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitRevision("", "hello-00001")

	writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "two",
		"        - {revision: hello-00001, percent: 100}\n        - {revision: hello-00002, tag: canary}\n"))
	if status, a := adminReload(t, n); status != 200 {
		t.Fatalf("reload with a traffic block: %d %+v", status, a)
	}
	waitRevision("canary", "hello-00002")
	for range 20 {
		if got := revisionOf(t, n, ""); got != "hello-00001" {
			t.Fatalf("an untagged request reached %q, want hello-00001 (hello-00002 takes 0 %%)", got)
		}
		if got := revisionOf(t, n, "host:canary"); got != "hello-00002" {
			t.Fatalf("a request to canary---hello.example reached %q, want hello-00002", got)
		}
	}

	writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "two",
		"        - {revision: hello-00001, percent: 50}\n        - {revision: hello-00009, percent: 50}\n"))
	status, a := adminReload(t, n)
	if status != 422 || len(a.Errors) != 1 || !strings.Contains(a.Errors[0], "tollgate.yaml:11:22: services[0].autoscale.traffic[1].revision: revision \"hello-00009\" is neither running nor kept") {
		t.Fatalf("reload naming hello-00009: %d %+v", status, a)
	}
	if got := revisionOf(t, n, "canary"); got != "hello-00002" {
		t.Fatalf("after a refused reload the canary tag reaches %q", got)
	}

	// latest_revision follows the latest ready revision: hello-00002
	// once its rollout has seen it ready.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, body := admin(t, n, "GET", "/v1/admin/pools/hello/revisions", "")
		if strings.Contains(body, `"name": "hello-00002",
      "latest": true,
      "latest_ready": true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hello-00002 never became the latest ready revision: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body := admin(t, n, "PUT", "/v1/admin/pools/hello/traffic",
		`{"traffic": [{"revision": "hello-00001", "percent": 90}, {"latest_revision": true, "percent": 10, "tag": "canary"}]}`)
	if code != 200 {
		t.Fatalf("PUT traffic: %d %s", code, body)
	}
	got := map[string]int{}
	for range 200 {
		got[revisionOf(t, n, "")]++
	}
	if got["hello-00001"] < 174 || got["hello-00001"] > 186 || got["hello-00002"] != 200-got["hello-00001"] {
		t.Fatalf("200 requests at 90/10: %v", got)
	}
	code, body = admin(t, n, "GET", "/v1/admin/pools/hello/revisions", "")
	var listed struct {
		Revisions []struct {
			Name    string
			Percent int
			Tags    []string
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &listed) != nil || len(listed.Revisions) != 2 ||
		listed.Revisions[0].Name != "hello-00001" || listed.Revisions[0].Percent != 90 ||
		listed.Revisions[1].Percent != 10 || strings.Join(listed.Revisions[1].Tags, ",") != "canary" {
		t.Fatalf("GET revisions: %d %s", code, body)
	}
	if code, _ := admin(t, n, "PUT", "/v1/admin/pools/hello/traffic", `{"traffic": [{"latest_revision": true, "percent": 99}]}`); code != 400 {
		t.Fatalf("PUT of percents summing to 99: %d, want 400", code)
	}
	if code, _ := admin(t, n, "PUT", "/v1/admin/pools/nope/traffic", `{"traffic": []}`); code != 404 {
		t.Fatalf("PUT to an unknown service: %d, want 404", code)
	}
}

// TestTrafficKeepingTooManyIsRefusedAtItsBlock: a reload whose traffic
// would keep more than traffic.MaxRevisions revisions running (though it
// names fewer) is refused at the traffic block's place in the file. The
// pool is not run: revisions take over at once, and nothing starts.
func TestTrafficKeepingTooManyIsRefusedAtItsBlock(t *testing.T) {
	dir := t.TempDir()
	b := pools{log: slog.New(slog.DiscardHandler)}
	parse := func(version int, tagFrom, tagTo int) *config.Config {
		t.Helper()
		tr := "        - {latest_revision: true, percent: 100}\n"
		for i := tagFrom; i <= tagTo; i++ {
			tr += fmt.Sprintf("        - {revision: hello-%05d, tag: t%d}\n", i, i)
		}
		cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(trafficConfig("sh", strconv.Itoa(version), tr)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	p, err := b.newPool(parse(1, 1, 0), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for v := 2; v <= traffic.MaxRevisions; v++ {
		if err := b.apply(p, parse(v, 1, v-1)); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	err = b.apply(p, parse(traffic.MaxRevisions+1, 1, traffic.MaxRevisions-1))
	want := dir + "/c.yaml:10:11: services[0].autoscale.traffic: would keep 11 revisions running"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, config.ErrInvalidConfig) {
		t.Fatalf("reload keeping 11 revisions: %v, want %s", err, want)
	}
}
