package node

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/logtest"
)

// adminReload posts to /v1/admin/reload with the token "tok" and returns
// the status and the decoded answer.
func adminReload(t *testing.T, n *Node) (int, reloadAnswer) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+n.Addr().String()+"/v1/admin/reload", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var a reloadAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("reload answer %q: %v", body, err)
	}
	return resp.StatusCode, a
}

type reloadAnswer struct {
	Reloaded []string `json:"reloaded"`
	Errors   []string `json:"errors"`
}

// TestAdminReloadAppliesRLSRules: POST /v1/admin/reload reloads the rls
// directory as SIGHUP does (it used to reload the config file only and
// keep the old rules), says which parts it reloaded, and a bad rls file
// keeps the old rules while the config part still reloads.
func TestAdminReloadAppliesRLSRules(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n")
	rlsDir := filepath.Join(dir, "ratelimit")
	os.Mkdir(rlsDir, 0o755)
	writeFile(t, rlsDir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: cfg, AdminToken: "tok", RLS: RLSOptions{ConfigDir: rlsDir}})
	run(t, n, &logs)
	if got := len(n.RLS().Config().Rules()); got != 1 {
		t.Fatalf("%d rules at start, want 1", got)
	}

	writeFile(t, rlsDir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 2}\n  - key: path\n    rate_limit: {unit: second, requests_per_unit: 5}\n")
	status, a := adminReload(t, n)
	if status != 200 || !slices.Equal(a.Reloaded, []string{PartConfig, PartRLS}) || len(a.Errors) != 0 {
		t.Fatalf("admin reload: %d %+v", status, a)
	}
	if got := len(n.RLS().Config().Rules()); got != 2 {
		t.Fatalf("%d rules after the admin reload, want the new file's 2", got)
	}

	writeFile(t, rlsDir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: lightyear, requests_per_unit: 1}\n")
	status, a = adminReload(t, n)
	if status != 422 || !slices.Equal(a.Reloaded, []string{PartConfig}) || len(a.Errors) != 1 || !strings.Contains(a.Errors[0], "edge.yaml:4:") {
		t.Fatalf("admin reload of a bad rls file: %d %+v", status, a)
	}
	if got := len(n.RLS().Config().Rules()); got != 2 {
		t.Fatalf("a bad rls file replaced the rules: %d", got)
	}
}

// TestShutdownEndsAStuckAdminReload: an admin reload blocked reading the
// config file (a FIFO whose writer never writes) does not hold up
// shutdown: Run's context ending ends the read at once ("reading
// stopped: shutting down", not the 10 s read bound), and Run returns.
func TestShutdownEndsAStuckAdminReload(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "services:\n  - preset: ecs\n")
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "tollgate.yaml")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: link, AdminToken: "tok"})
	stop := run(t, n, &logs)
	os.Remove(link)
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	answered := make(chan reloadAnswer, 1)
	go func() {
		_, a := adminReload(t, n)
		answered <- a
	}()
	for deadline := time.Now().Add(30 * time.Second); !reloading(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the admin reload did not start within 30 s")
		}
	}
	stop() // fails the test if Run does not return
	select {
	case a := <-answered:
		if len(a.Errors) != 1 || !strings.Contains(a.Errors[0], "reading stopped: shutting down") {
			t.Errorf("the stuck reload's answer: %+v", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck admin reload was never answered")
	}
}

// reloading reports whether a Reload is running.
func reloading(n *Node) bool {
	if n.reloadMu.TryLock() {
		n.reloadMu.Unlock()
		return false
	}
	return true
}
