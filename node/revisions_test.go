package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/traffic"
	"github.com/tollgate/tollgate/state"
	"github.com/tollgate/tollgate/state/bolt"
	"github.com/tollgate/tollgate/state/transfer"
)

// revisionsOf lists p's revisions of hello as "name:percent" (running)
// and "name:retired", and its traffic block.
func revisionsOf(t *testing.T, p *pool.Pool) (revs []string, block string) {
	t.Helper()
	ts, err := p.Revisions("hello")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ts.Revisions {
		revs = append(revs, r.Name+":"+itoa(r.Percent))
	}
	for _, r := range ts.Retired {
		revs = append(revs, r.Name+":retired")
	}
	b, _ := json.Marshal(ts.Traffic)
	return revs, string(b)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Pools made one after another on one data directory, as a restart
// makes them (not run: revisions take over at once and nothing starts):
// a pool made from the config its predecessor last had keeps the names
// and the admin traffic; a changed command makes the next number and
// keeps the old latest revision for a rollback; a kept traffic naming a
// revision that is gone gives way to the config's, and the log says why.
func TestRevisionsAndAdminTrafficOutliveThePool(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "data"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testRevisionsOutliveThePool(t, dir, boltRevisions{db})
}

// TestRevisionsAndAdminTrafficOutliveThePoolOnRedis: the same on Redis,
// the store of nodes that share it.
func TestRevisionsAndAdminTrafficOutliveThePoolOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	client, closeClient, err := storeClient(config.Store{URL: srv.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient()
	testRevisionsOutliveThePool(t, t.TempDir(), redisRevisions{client: client, timeout: 30 * time.Second})
}

func testRevisionsOutliveThePool(t *testing.T, dir string, kept revisionRecords) {
	var logs logtest.Buffer
	b := pools{log: slog.New(slog.NewTextHandler(&logs, nil)), kept: kept}
	block := ""
	parse := func(version string) *config.Config {
		t.Helper()
		cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(trafficConfig("sh", version, block)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	start := func(version string) *pool.Pool {
		t.Helper()
		p, err := b.newPool(parse(version), prometheus.NewRegistry())
		if err != nil {
			t.Fatalf("start with version %s: %v\n%s", version, err, logs.String())
		}
		return p
	}
	check := func(p *pool.Pool, step string, wantRevs []string, wantTraffic string) {
		t.Helper()
		revs, block := revisionsOf(t, p)
		if !slices.Equal(revs, wantRevs) || block != wantTraffic {
			t.Fatalf("%s: revisions %v traffic %s; want %v %s\n%s", step, revs, block, wantRevs, wantTraffic, logs.String())
		}
	}

	p := start("one")
	if err := b.apply(p, parse("two")); err != nil {
		t.Fatal(err)
	}
	split := []traffic.Target{{RevisionName: "hello-00001", Percent: 90}, {LatestRevision: true, Percent: 10, Tag: "canary"}}
	if err := p.SetTraffic("hello", split); err != nil {
		t.Fatal(err)
	}
	splitJSON := `[{"revision":"hello-00001","percent":90},{"latest_revision":true,"percent":10,"tag":"canary"}]`
	check(p, "before the restart", []string{"hello-00001:90", "hello-00002:10"}, splitJSON)

	p = start("two")
	check(p, "restarted with the same config", []string{"hello-00001:90", "hello-00002:10"}, splitJSON)
	if err := p.SetTraffic("hello", nil); err != nil {
		t.Fatal(err)
	}
	check(p, "all to the latest", []string{"hello-00002:100", "hello-00001:retired"}, `[]`)

	p = start("two")
	check(p, "restarted after the retirement", []string{"hello-00002:100", "hello-00001:retired"}, `[]`)
	if err := p.SetTraffic("hello", []traffic.Target{{RevisionName: "hello-00001", Percent: 100}}); err != nil {
		t.Fatalf("rollback to the retired hello-00001 after a restart: %v", err)
	}
	check(p, "rolled back", []string{"hello-00001:100", "hello-00002:0"}, `[{"revision":"hello-00001","percent":100}]`)

	p = start("three")
	check(p, "restarted with a new command", []string{"hello-00001:100", "hello-00003:0", "hello-00002:retired"}, `[{"revision":"hello-00001","percent":100}]`)

	// A kept traffic naming a revision the store does not have.
	var sv pool.SavedRevisions
	if v, err := kept.get("hello"); err != nil || json.Unmarshal(v, &sv) != nil {
		t.Fatalf("the kept record %q: %v", v, err)
	}
	for _, o := range sv.Others {
		if !strings.Contains(o.Template, "VERSION") || len(o.Recipe) == 0 {
			t.Fatalf("the kept revision %s lost its template or recipe: %+v", o.Name, o)
		}
	}
	sv.TrafficSet, sv.Traffic = true, []traffic.Target{{RevisionName: "hello-00009", Percent: 100}}
	v, _ := json.Marshal(sv)
	if err := kept.put([]string{"hello"}, [][]byte{v}); err != nil {
		t.Fatal(err)
	}
	p = start("three")
	check(p, "restarted with a kept traffic naming a revision that is gone", []string{"hello-00003:100", "hello-00002:retired", "hello-00001:retired"}, `[]`)
	if !strings.Contains(logs.String(), "names a revision that is gone") || !strings.Contains(logs.String(), "hello-00009") {
		t.Fatalf("no log line says why the kept traffic was dropped:\n%s", logs.String())
	}

	// A PUT of all to the latest over the config's split holds across a
	// restart while the config's traffic is the one it replaced.
	block = "        - {revision: hello-00001, percent: 50}\n        - {latest_revision: true, percent: 50}\n"
	p = start("three")
	check(p, "the config splits 50/50", []string{"hello-00001:50", "hello-00003:50", "hello-00002:retired"},
		`[{"revision":"hello-00001","percent":50},{"latest_revision":true,"percent":50}]`)
	if err := p.SetTraffic("hello", nil); err != nil {
		t.Fatal(err)
	}
	p = start("three")
	check(p, "restarted after a PUT of all to the latest", []string{"hello-00003:100", "hello-00002:retired", "hello-00001:retired"}, `[]`)
	block = "        - {revision: hello-00001, percent: 100}\n"
	p = start("three")
	check(p, "restarted with the config's traffic changed", []string{"hello-00001:100", "hello-00003:0", "hello-00002:retired"},
		`[{"revision":"hello-00001","percent":100}]`)
	if !strings.Contains(logs.String(), "the config's traffic changed since the admin API set it") {
		t.Fatalf("no log line says the config's changed traffic replaced the kept one:\n%s", logs.String())
	}
}

// A node with a data directory, stopped and started again on it with
// real instances: the revision names stay (no new revision for the same
// config), a PUT of 90/10 still splits 90/10, and after a PUT of all the
// traffic to the latest revision and another restart, a PUT naming the
// retired hello-00001 runs it again and moves the traffic to it.
func TestRevisionsAndAdminTrafficSurviveARestart(t *testing.T) {
	bin := testservice.Build(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	path := writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "one", ""))
	var logs logtest.Buffer
	start := func() (*Node, func()) {
		t.Helper()
		n := newTestNode(t, &logs, Options{ConfigPath: path, AdminToken: "tok", DataDir: data, DataDirSet: true})
		stop := run(t, n, &logs)
		return n, func() { stop(); n.Close() }
	}
	waitRevision := func(n *Node, tag, want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for got := revisionOf(t, n, tag); got != want; got = revisionOf(t, n, tag) {
			if time.Now().After(deadline) {
				t.Fatalf("tag %q reaches %q, want %s\n%s", tag, got, want, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	put := func(n *Node, body string) {
		t.Helper()
		if code, b := admin(t, n, "PUT", "/v1/admin/pools/hello/traffic", body); code != 200 {
			t.Fatalf("PUT traffic %s: %d %s\n%s", body, code, b, logs.String())
		}
	}
	listed := func(n *Node) string {
		t.Helper()
		_, body := admin(t, n, "GET", "/v1/admin/pools/hello/revisions", "")
		var ts pool.TrafficStatus
		if err := json.Unmarshal([]byte(body), &ts); err != nil {
			t.Fatalf("GET revisions: %v: %s", err, body)
		}
		var out []string
		for _, r := range ts.Revisions {
			out = append(out, r.Name+":"+itoa(r.Percent))
		}
		for _, r := range ts.Retired {
			out = append(out, r.Name+":retired")
		}
		return strings.Join(out, " ")
	}

	n, stop := start()
	waitRevision(n, "", "hello-00001")
	writeFile(t, dir, "tollgate.yaml", trafficConfig(bin, "two", ""))
	if status, a := adminReload(t, n); status != 200 {
		t.Fatalf("reload: %d %+v", status, a)
	}
	waitRevision(n, "", "hello-00002")
	put(n, `{"traffic": [{"revision": "hello-00001", "percent": 90}, {"latest_revision": true, "percent": 10, "tag": "canary"}]}`)
	// Answered: it is committed to the data file (an export reads the
	// committed state).
	if code, body := admin(t, n, "GET", "/v1/admin/state/export", ""); code != 200 ||
		!strings.Contains(body, `{"table":"revisions","key":"hello","value":"`) ||
		!strings.Contains(body, `\"traffic\":[{\"revision\":\"hello-00001\",\"percent\":90}`) {
		t.Fatalf("after the PUT the export is %d:\n%s", code, body)
	}
	stop()

	n, stop = start()
	if got := listed(n); got != "hello-00001:90 hello-00002:10" {
		t.Fatalf("after the restart the revisions are %s, want hello-00001:90 hello-00002:10\n%s", got, logs.String())
	}
	waitRevision(n, "canary", "hello-00002")
	got := map[string]int{}
	for range 100 {
		got[revisionOf(t, n, "")]++
	}
	if got["hello-00001"] < 85 || got["hello-00001"] > 95 || got["hello-00002"] != 100-got["hello-00001"] {
		t.Fatalf("100 requests after the restart: %v, want 90/10", got)
	}
	put(n, `{"traffic": [{"latest_revision": true, "percent": 100}]}`)
	stop()

	n, stop = start()
	defer stop()
	if got := listed(n); got != "hello-00002:100 hello-00001:retired" {
		t.Fatalf("after the second restart the revisions are %s, want hello-00002:100 hello-00001:retired\n%s", got, logs.String())
	}
	put(n, `{"traffic": [{"revision": "hello-00001", "percent": 100}]}`)
	for range 10 {
		if got := revisionOf(t, n, ""); got != "hello-00001" {
			t.Fatalf("after the rollback PUT a request reached %q, want hello-00001", got)
		}
	}
	// It runs the command it was made from, kept in the data file.
	req, _ := http.NewRequest("GET", "http://"+n.Addr().String()+"/env", nil)
	req.Host = "hello.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env["VERSION"] != "one" {
		t.Fatalf("the rolled-back revision runs with VERSION=%q (%v), want one", env["VERSION"], err)
	}
}

// A revisions record that is not one refuses the start, naming the file,
// the record and what to do, rather than renaming the revisions.
func TestUnreadableRevisionsRecordRefusesTheStart(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "data"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Write(func(w *bolt.Writer) error { return w.Put(state.RevisionsTable, "hello", []byte("{not json")) }); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(trafficConfig("sh", "one", "")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pools{log: slog.New(slog.DiscardHandler), kept: boltRevisions{db}}.newPool(cfg, prometheus.NewRegistry())
	want := db.Path() + ": table revisions key hello is unreadable"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "restore it from a backup") {
		t.Fatalf("start with an unreadable record: %v, want %s", err, want)
	}
}

// A store that cannot be read refuses the start, saying so and why,
// and that tollgate waits for it rather than rename the revisions: not
// that the record is damaged and to be restored from a backup, which is
// for a record the store returned and that is not one (its bytes, or in
// Redis another type than a hash under the key).
func TestRevisionsStoreOutOfReachRefusesTheStartSayingSo(t *testing.T) {
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "c.yaml"), []byte(trafficConfig("sh", "one", "")))
	if err != nil {
		t.Fatal(err)
	}
	redisAt := func(url string, timeout time.Duration) revisionRecords {
		t.Helper()
		client, closeClient, err := storeClient(config.Store{URL: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeClient)
		return redisRevisions{client: client, timeout: timeout}
	}
	const unreachable, damaged = "could not be read", "is unreadable"
	for _, tc := range []struct {
		name string
		kept func(t *testing.T) revisionRecords
		want []string // in the message, besides the store and key
		not  string   // not in the message
	}{
		{"Redis refusing connections", func(t *testing.T) revisionRecords {
			return redisAt("redis://"+redistest.ClosedAddr(t), 30*time.Second)
		}, []string{unreachable, "connection refused", "would rename them"}, "restore it from a backup"},
		{"Redis stopped", func(t *testing.T) revisionRecords {
			srv := redistest.Start(t)
			kept := redisAt(srv.URL(), 30*time.Second)
			srv.Stop()
			return kept
		}, []string{unreachable, "connection refused", "would rename them"}, "restore it from a backup"},
		{"Redis not answering", func(t *testing.T) revisionRecords {
			srv := redistest.Start(t)
			srv.Pause()
			t.Cleanup(srv.Resume)
			return redisAt(srv.URL(), 2*time.Second)
		}, []string{unreachable, "no answer within 2s", "would rename them"}, "restore it from a backup"},
		{"the data file closed", func(t *testing.T) revisionRecords {
			db, err := bolt.Open(filepath.Join(t.TempDir(), "data"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			return boltRevisions{db}
		}, []string{unreachable, "would rename them"}, "restore it from a backup"},
		{"Redis holding a record that is not one", func(t *testing.T) revisionRecords {
			srv := redistest.Start(t)
			kept := redisAt(srv.URL(), 30*time.Second)
			if err := kept.(redisRevisions).client.HSet(context.Background(), transfer.RedisRevisionsKey, "hello", "{not json").Err(); err != nil {
				t.Fatal(err)
			}
			return kept
		}, []string{damaged, "restore it from a backup"}, unreachable},
		{"Redis holding another type under the key", func(t *testing.T) revisionRecords {
			srv := redistest.Start(t)
			kept := redisAt(srv.URL(), 30*time.Second)
			if err := kept.(redisRevisions).client.Set(context.Background(), transfer.RedisRevisionsKey, "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
			return kept
		}, []string{damaged, "WRONGTYPE", "restore it from a backup"}, unreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept := tc.kept(t)
			_, err := pools{log: slog.New(slog.DiscardHandler), kept: kept}.newPool(cfg, prometheus.NewRegistry())
			if err == nil {
				t.Fatal("the start went on without the kept revisions")
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range append(tc.want, kept.where()+": table revisions key hello") {
				if !strings.Contains(msg, w) {
					t.Errorf("the start's error does not say %q: %s", w, msg)
				}
			}
			if strings.Contains(msg, tc.not) {
				t.Errorf("the start's error says %q: %s", tc.not, msg)
			}
		})
	}
}

// BenchmarkSetTraffic is an admin PUT's cost in the pool (not run, so
// that traffic moves at once): in memory, and kept in a data directory,
// where it waits for its fsync.
func BenchmarkSetTraffic(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "memory"
		if durable {
			name = "data_dir"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			bp := pools{log: slog.New(slog.DiscardHandler)}
			if durable {
				db, err := bolt.Open(filepath.Join(dir, "data"), bolt.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				bp.kept = boltRevisions{db}
			}
			parse := func(version string) *config.Config {
				cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(trafficConfig("sh", version, "")))
				if err != nil {
					b.Fatal(err)
				}
				return cfg
			}
			p, err := bp.newPool(parse("one"), prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			if err := bp.apply(p, parse("two")); err != nil {
				b.Fatal(err)
			}
			splits := [][]traffic.Target{
				{{RevisionName: "hello-00001", Percent: 90}, {LatestRevision: true, Percent: 10}},
				{{RevisionName: "hello-00001", Percent: 10}, {LatestRevision: true, Percent: 90}},
			}
			b.ResetTimer()
			for i := range b.N {
				if err := p.SetTraffic("hello", splits[i%2]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
