package gateway

import (
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

func take(t *testing.T, url, account, action string) int {
	t.Helper()
	body := `{"service":"ecs","account":"` + account + `","region":"us-east-1","action":"` + action + `"}`
	resp, err := http.Post(url+"/v1/take", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getJSON(t *testing.T, url, token string, v any) int {
	t.Helper()
	status, body := adminRequest(t, "GET", url, token)
	if status == 200 {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %v: %s", url, err, body)
		}
	}
	return status
}

// TestUIFiles GETs every embedded file of the page and every admin path
// its script fetches.
func TestUIFiles(t *testing.T) {
	sq, err := servicequotas.New(servicequotas.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newTestServer(t, limitertest.NewClock(), Options{AdminToken: "tok", Live: liveview.New(liveview.Options{}), AdminHandlers: sq.AdminHandlers()})
	files := liveview.Files()
	n := 0
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		resp, err := http.Get(srv.URL + "/ui/" + p)
		if err != nil {
			return err
		}
		resp.Body.Close()
		want := mime.TypeByExtension(path.Ext(p))
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != want {
			t.Errorf("/ui/%s: %d %q, want 200 %q", p, resp.StatusCode, resp.Header.Get("Content-Type"), want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("/ui/%s: Content-Security-Policy %q", p, csp)
		}
		return nil
	})
	if err != nil || n < 3 {
		t.Fatalf("walked %d files: %v", n, err)
	}
	resp, err := http.Get(srv.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/ui/" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("/ui: %d at %s, want the page at /ui/", resp.StatusCode, resp.Request.URL.Path)
	}

	js, _ := fs.ReadFile(files, "live.js")
	more, _ := fs.ReadFile(files, "quotas.js")
	js = append(js, more...)
	paths := regexp.MustCompile(`"(/v1/admin/[a-z/]+)`).FindAllStringSubmatch(string(js), -1)
	if len(paths) < 6 {
		t.Fatalf("found %d admin paths in live.js and quotas.js, want at least 7", len(paths))
	}
	for _, m := range paths {
		if status, body := adminRequest(t, "GET", srv.URL+m[1], "tok"); status != 200 || !json.Valid([]byte(body)) {
			t.Errorf("GET %s: %d %s, want 200 and JSON", m[1], status, body)
		}
		if status, _ := adminRequest(t, "GET", srv.URL+m[1], ""); status != 401 {
			t.Errorf("GET %s without the token: %d, want 401", m[1], status)
		}
	}
}

func TestUIOffWithoutAdmin(t *testing.T) {
	_, srv := newTestServer(t, limitertest.NewClock(), Options{Live: liveview.New(liveview.Options{})})
	for _, p := range []string{"/ui/", "/ui/live.js", "/v1/admin/live/hot"} {
		if status, _ := adminRequest(t, "GET", srv.URL+p, "x"); status != 404 {
			t.Errorf("%s with admin disabled: %d, want 404", p, status)
		}
	}
	_, srv = newTestServer(t, limitertest.NewClock(), Options{AdminToken: "tok"})
	if status, body := adminRequest(t, "GET", srv.URL+"/v1/admin/live/decisions", "tok"); status != 404 || !strings.Contains(body, "Options.Live") {
		t.Errorf("no recorder: %d %s, want 404 naming Options.Live", status, body)
	}
}

func TestLiveEndpoints(t *testing.T) {
	rec := liveview.New(liveview.Options{})
	_, srv := newTestServer(t, limitertest.NewClock(), Options{AdminToken: "tok", Live: rec})
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// The ecs cluster-read bucket holds 50 and the clock stands still: 60
	// takes of one account are 50 allowed and 10 throttled.
	for range 60 {
		take(t, srv.URL, "111111111111", "DescribeClusters")
	}
	for range 3 {
		take(t, srv.URL, "222222222222", "ListClusters")
	}
	rec.Tick(start.Add(time.Second))
	take(t, srv.URL, "111111111111", "DescribeClusters")
	rec.Tick(start.Add(2 * time.Second))

	var dec liveDecisions
	if status := getJSON(t, srv.URL+"/v1/admin/live/decisions", "tok", &dec); status != 200 {
		t.Fatalf("decisions: %d", status)
	}
	if len(dec.TimesMs) != 2 || dec.TimesMs[1] != start.Add(2*time.Second).UnixMilli() || dec.DurationsMs[1] != 1000 {
		t.Fatalf("decisions times %v %v", dec.TimesMs, dec.DurationsMs)
	}
	var read *liveSeries
	for i, s := range dec.Series {
		if s.Service == "ecs" && s.Category == "cluster-read" {
			read = &dec.Series[i]
		}
	}
	if read == nil || read.Allowed[0] != 53 || read.Throttled[0] != 10 || read.Throttled[1] != 1 || read.Allowed[1] != 0 {
		t.Fatalf("cluster-read series %+v, want allowed [53 0] throttled [10 1]", read)
	}
	var since liveDecisions
	getJSON(t, srv.URL+"/v1/admin/live/decisions?since="+itoa(dec.TimesMs[0]), "tok", &since)
	if len(since.TimesMs) != 1 || since.TimesMs[0] != dec.TimesMs[1] {
		t.Errorf("since the first point: %v, want the second only", since.TimesMs)
	}

	var hot liveHot
	if status := getJSON(t, srv.URL+"/v1/admin/live/hot?n=5", "tok", &hot); status != 200 {
		t.Fatalf("hot: %d", status)
	}
	if hot.WindowSeconds != 2 || len(hot.Buckets) != 1 || hot.Dropped != 0 {
		t.Fatalf("hot %+v, want one bucket over 2 s, nothing dropped", hot)
	}
	b := hot.Buckets[0]
	if b.Account != "111111111111" || b.Category != "cluster-read" || b.Throttled != 11 || b.ThrottlesPerSecond != 5.5 ||
		b.Tokens == nil || *b.Tokens != 0 || b.Capacity != 50 || b.Key != "{ecs/111111111111}:us-east-1:cluster-read" {
		t.Errorf("hottest %+v, want account 111111111111 with 11 throttles (5.5/s) and 0 of 50 tokens", b)
	}

	var use liveUsage
	if status := getJSON(t, srv.URL+"/v1/admin/live/usage", "tok", &use); status != 200 || len(use.Buckets) != 2 || use.WindowSeconds != 1 {
		t.Fatalf("usage %d %+v, want two buckets over the 1 s since the first tick", status, use)
	}
	if u := use.Buckets[0]; u.Account != "111111111111" || u.Throttled != 11 || u.PeakUsed != 50 || u.PeakOf != 50 || u.Peak != 1 || u.Capacity != 50 || u.RatePerSecond != 20 {
		t.Errorf("most throttled %+v, want 111111111111: 11 throttled, 50 of 50 in use at peak, limit 50 at 20/s", u)
	}
	if u := use.Buckets[1]; u.Account != "222222222222" || u.Throttled != 0 || u.PeakUsed != 3 || u.Peak != 0.06 {
		t.Errorf("second %+v, want 222222222222 with 3 of 50 in use at peak", u)
	}
	getJSON(t, srv.URL+"/v1/admin/live/usage?account=222222222222&n=5", "tok", &use)
	if len(use.Buckets) != 1 || use.Buckets[0].Account != "222222222222" {
		t.Errorf("usage of one account: %+v", use.Buckets)
	}

	var st liveStore
	if status := getJSON(t, srv.URL+"/v1/admin/live/store", "tok", &st); status != 200 || st.Kind != "memory" || st.State != "ok" || st.Buckets == nil || *st.Buckets != 2 {
		t.Errorf("store %d %+v, want memory, ok, 2 buckets", status, st)
	}

	for _, bad := range []string{"/v1/admin/live/decisions?since=x", "/v1/admin/live/decisions?since=-1", "/v1/admin/live/hot?n=0", "/v1/admin/live/hot?n=101", "/v1/admin/live/hot?n=ten", "/v1/admin/live/usage?n=0", "/v1/admin/live/usage?n=501"} {
		if status, body := adminRequest(t, "GET", srv.URL+bad, "tok"); status != 400 || !strings.Contains(body, "want") {
			t.Errorf("%s: %d %s, want 400 saying what it wants", bad, status, body)
		}
	}
	var index struct{ Endpoints []adminEndpoint }
	if status := getJSON(t, srv.URL+"/v1/admin/", "tok", &index); status != 200 || len(index.Endpoints) < 5 {
		t.Errorf("admin index: %d %+v", status, index)
	}
}

// TestLiveHotDropped overflows the recorder's buffers (nothing folds them
// between two ticks): the hot endpoint and /metrics report the drops, and
// the bucket's range still holds its true count.
func TestLiveHotDropped(t *testing.T) {
	rec := liveview.New(liveview.Options{})
	_, srv := newTestServer(t, limitertest.NewClock(), Options{AdminToken: "tok", Live: rec})
	const n = 200_000 // far more than the buffers hold
	k := quota.Key{Service: "ecs", Account: "111111111111", Region: "us-east-1", Category: "cluster-read"}
	for range n {
		rec.Throttled(k)
	}
	rec.Tick(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	var hot liveHot
	if status := getJSON(t, srv.URL+"/v1/admin/live/hot", "tok", &hot); status != 200 {
		t.Fatalf("hot: %d", status)
	}
	if hot.Dropped == 0 || hot.Dropped >= n || len(hot.Buckets) != 1 {
		t.Fatalf("hot %+v, want some of %d dropped and one bucket", hot, n)
	}
	if b := hot.Buckets[0]; b.Throttled != n || b.ErrorBound != hot.Dropped {
		t.Errorf("bucket %+v, want %d throttled, error bound %d (the drops)", b, n, hot.Dropped)
	}
	_, metrics := adminRequest(t, "GET", srv.URL+"/metrics", "")
	m := regexp.MustCompile(`(?m)^tollgate_live_hot_dropped_total (\S+)$`).FindStringSubmatch(metrics)
	if m == nil {
		t.Fatal("/metrics lacks tollgate_live_hot_dropped_total")
	}
	if v, err := strconv.ParseFloat(m[1], 64); err != nil || v != float64(hot.Dropped) {
		t.Errorf("tollgate_live_hot_dropped_total %s, want %d", m[1], hot.Dropped)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
