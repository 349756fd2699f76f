package node

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
)

// TestStickyByClientAddressThroughConfig runs real instances split 50/50
// with sticky: {client_address: true}: every request from this test
// (127.0.0.1) reaches one revision, where a split per request would
// alternate; a reload without the sticky block splits per request again.
func TestStickyByClientAddressThroughConfig(t *testing.T) {
	bin := testservice.Build(t)
	dir := t.TempDir()
	path := writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "one", ""))
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: path, AdminToken: "tok"})
	run(t, n, &logs)
	deadline := time.Now().Add(60 * time.Second)
	for got := revisionOf(t, n, ""); got != "hello-00001"; got = revisionOf(t, n, "") {
		if time.Now().After(deadline) {
			t.Fatalf("hello-00001 not ready: %s\n%s", got, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	split := "        - {revision: hello-00001, percent: 50}\n        - {latest_revision: true, percent: 50}\n"
	writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "two", split+"      sticky: {client_address: true}\n"))
	if status, a := adminReload(t, n); status != 200 {
		t.Fatalf("reload with a sticky split: %d %+v", status, a)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		_, body := admin(t, n, "GET", "/v1/admin/pools/hello/revisions", "")
		var listed pool.TrafficStatus
		if json.Unmarshal([]byte(body), &listed) == nil && len(listed.Revisions) == 2 &&
			listed.Revisions[1].LatestReady && listed.Revisions[1].Percent == 50 {
			if listed.Sticky == nil || !listed.Sticky.ClientAddress {
				t.Fatalf("the revisions listing does not show the sticky key: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hello-00002 never took its 50 %%: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	first := revisionOf(t, n, "")
	for i := range 40 {
		if got := revisionOf(t, n, ""); got != first {
			t.Fatalf("request %d from 127.0.0.1 reached %s, the first %s: not sticky", i, got, first)
		}
	}

	writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "two", split))
	if status, a := adminReload(t, n); status != 200 {
		t.Fatalf("reload without sticky: %d %+v", status, a)
	}
	if _, body := admin(t, n, "GET", "/v1/admin/pools/hello/revisions", ""); strings.Contains(body, `"sticky"`) {
		t.Fatalf("the listing shows a sticky key after a reload without one: %s", body)
	}
	got := map[string]int{}
	for range 40 {
		got[revisionOf(t, n, "")]++
	}
	if got["hello-00001"] != 20 || got["hello-00002"] != 20 {
		t.Fatalf("40 requests per request at 50/50: %v, want 20/20", got)
	}
}
