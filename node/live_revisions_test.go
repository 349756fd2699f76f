package node

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testservice"
)

// TestLiveViewShowsRevisions runs real instances of two revisions split
// 90/10 (hello-00002 tagged canary) and reads the live view's JSON: each
// revision has its series of instances, named with its percent and tags,
// and at the newest point the revisions' counts add up to the states'.
func TestLiveViewShowsRevisions(t *testing.T) {
	bin := testservice.Build(t)
	dir := t.TempDir()
	path := writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "one", ""))
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: path, AdminToken: "tok"})
	run(t, n, &logs)
	deadline := time.Now().Add(60 * time.Second)
	for got := revisionOf(t, n, ""); got != "hello-00001"; got = revisionOf(t, n, "") {
		if time.Now().After(deadline) {
			t.Fatalf("hello.example reaches %q, want hello-00001\n%s", got, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "two",
		"        - {revision: hello-00001, percent: 90}\n        - {revision: hello-00002, percent: 10, tag: canary}\n"))
	if status, a := adminReload(t, n); status != 200 {
		t.Fatalf("reload with a 90/10 traffic block: %d %+v", status, a)
	}

	type revision struct {
		Name      string   `json:"name"`
		Percent   int      `json:"percent"`
		Tags      []string `json:"tags"`
		Instances []int    `json:"instances"`
	}
	eventually(t, "both revisions with their instances in the live view", func() (bool, string) {
		code, body := admin(t, n, "GET", "/v1/admin/live/autoscaled", "")
		var sc struct {
			TimesMs  []int64 `json:"times_ms"`
			Services []struct {
				Name      string           `json:"name"`
				Instances map[string][]int `json:"instances"`
				Revisions []revision       `json:"revisions"`
			} `json:"services"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &sc) != nil || len(sc.Services) != 1 || len(sc.TimesMs) == 0 {
			return false, body
		}
		s, k := sc.Services[0], len(sc.TimesMs)-1
		if s.Name != "hello" || len(s.Revisions) != 2 {
			return false, body
		}
		one, two := s.Revisions[0], s.Revisions[1]
		states, revs := 0, 0
		for _, series := range s.Instances {
			states += series[k]
		}
		for _, rv := range s.Revisions {
			if len(rv.Instances) != len(sc.TimesMs) {
				t.Fatalf("revision %s has %d points, the times %d: %s", rv.Name, len(rv.Instances), len(sc.TimesMs), body)
			}
			revs += rv.Instances[k]
		}
		ok := one.Name == "hello-00001" && one.Percent == 90 && len(one.Tags) == 0 && one.Instances[k] >= 1 &&
			two.Name == "hello-00002" && two.Percent == 10 && strings.Join(two.Tags, ",") == "canary" && two.Instances[k] >= 1 &&
			revs == states
		return ok, body
	})
}
