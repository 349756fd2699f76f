package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sqapi "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/internal/browsertest"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// ScreenshotsEnv names a directory where the browser tests also save their
// screenshots (the README's images: TOLLGATE_SCREENSHOTS=docs).
const screenshotsEnv = "TOLLGATE_SCREENSHOTS"

// pageView is what the test reads off the live page.
type pageView struct {
	Newest string `json:"newest"`
	Rates  []struct {
		Series                     string
		Allowed, Throttled, Errors string
	} `json:"rates"`
	Hot []struct {
		Key, Account, Rate, Tokens string
	} `json:"hot"`
	Store map[string]string `json:"store"`
	Pools []struct {
		Service string
		Facts   map[string]string
		Scales  [][]string
		// Revisions are the revisions legend's names; Lines the
		// revisions each chart line is drawn for.
		Revisions []string
		Lines     []string
	} `json:"pools"`
}

const readPage = `(() => ({
  newest: document.getElementById("status").dataset.newest || "",
  rates: [...document.querySelectorAll("#rates tbody tr")].map((tr) => ({
    Series: tr.dataset.series,
    Allowed: tr.querySelector(".allowed").textContent,
    Throttled: tr.querySelector(".throttled").textContent,
    Errors: tr.querySelector(".errors").textContent,
  })),
  hot: [...document.querySelectorAll("#hot tbody tr")].map((tr) => ({
    Key: tr.dataset.key,
    Account: tr.querySelector(".account").textContent,
    Rate: tr.querySelector(".rate").textContent,
    Tokens: tr.querySelector(".tokens").textContent,
  })),
  store: Object.fromEntries([...document.querySelectorAll("#store dd")].map((dd) => [dd.dataset.field, dd.textContent])),
  pools: [...document.querySelectorAll("#pools .pool")].map((div) => ({
    Service: div.dataset.service,
    Facts: Object.fromEntries([...div.querySelectorAll(".facts span")].map((s) => [s.dataset.field, s.textContent])),
    Scales: [...div.querySelectorAll("table.scales tbody tr")].map((tr) => [...tr.cells].map((td) => td.textContent)),
    Revisions: [...div.querySelectorAll(".legend.revisions .revision")].map((s) => s.textContent),
    Lines: [...div.querySelectorAll("svg.revisions polyline")].map((l) => l.dataset.revision),
  })),
}))()`

// fmtRate writes a rate as the page's fmt does.
func fmtRate(v float64) string {
	if v == 0 {
		return "0"
	}
	if v >= 100 || v == math.Trunc(v) {
		s := strconv.FormatInt(int64(math.Round(v)), 10)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// liveLoad sends one synthetic second s of the test's load as one batch:
// account 999900001111 hammers cluster-read (capacity 50, 20/s) with 25 to
// 54 takes a second, 555500006666 sends 7 CreateCluster a second to
// cluster-modify (20, 1/s), and two accounts stay within their limits.
func liveLoad(t *testing.T, url string, s int) {
	t.Helper()
	var items []string
	add := func(account, action string, n int) {
		for range n {
			items = append(items, `{"account":"`+account+`","action":"`+action+`"}`)
		}
	}
	add("999900001111", "DescribeClusters", 25+s%30)
	add("555500006666", "CreateCluster", 7)
	add("111100002222", "DescribeServices", 8+s%5)
	add("333300004444", "RunTask", 3)
	body := `{"service":"ecs","region":"us-east-1","requests":[` + strings.Join(items, ",") + `]}`
	resp, err := http.Post(url+"/v1/take/batch", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d", resp.StatusCode)
	}
}

// TestUIInBrowser drives a known load through a gateway, opens /ui in a
// headless browser, and checks the page against the JSON endpoints.
func TestUIInBrowser(t *testing.T) {
	t.Parallel() // its own servers
	br := browsertest.Start(t, 1200, 820)
	clock := limitertest.NewClock()
	svc := &fakeScaler{}
	rec := liveview.New(liveview.Options{Services: svc.sample})
	// The Service Quotas API beside ECS, so that the page shows its
	// quota increase requests panel, with two requests waiting.
	ecsSvc, _ := quota.Preset("ecs")
	sqSvc, _ := quota.Preset("servicequotas")
	cfg, err := quota.NewConfig([]*quota.Service{ecsSvc, sqSvc}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	quotas, err := servicequotas.New(servicequotas.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newTestServer(t, clock, Options{Config: cfg, AdminToken: "tok", Live: rec,
		Handlers: map[string]http.Handler{"servicequotas": quotas}, Limits: quotas, AdminHandlers: quotas.AdminHandlers()})
	for _, r := range []struct {
		account, category string
		kind              servicequotas.Kind
		desired           float64
	}{{"999900001111", "cluster-read", servicequotas.Burst, 100}, {"555500006666", "cluster-modify", servicequotas.Rate, 5}} {
		client := sqapi.New(sqapi.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider(r.account, "x", ""), Retryer: aws.NopRetryer{}})
		if _, err := client.RequestServiceQuotaIncrease(context.Background(), &sqapi.RequestServiceQuotaIncreaseInput{ServiceCode: aws.String("ecs"),
			QuotaCode: aws.String(servicequotas.QuotaCode("ecs", r.category, r.kind)), DesiredValue: aws.Float64(r.desired)}); err != nil {
			t.Fatal(err)
		}
	}

	// Ten minutes of load on the store's fake clock, each second closed
	// with a tick stamped on the wall clock (so the page's times read
	// naturally).
	const seconds = 600
	base := time.Now().Truncate(time.Second).Add(-seconds * time.Second)
	for s := 1; s <= seconds; s++ {
		liveLoad(t, srv.URL, s)
		svc.step(base.Add(time.Duration(s)*time.Second), s)
		clock.Advance(time.Second)
		rec.Tick(base.Add(time.Duration(s) * time.Second))
	}

	err = chromedp.Do(br.Ctx,
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible("#login"),
		chromedp.SendKeys("#token", "tok"),
		chromedp.Click(`#login button[type="submit"]`),
		chromedp.WaitVisible("#live"),
		chromedp.WaitVisible("#requests"),
	)
	if err != nil {
		t.Fatal(err)
	}
	view := waitForPage(t, br, base.Add(seconds*time.Second))
	checkPage(t, srv.URL, view)

	// One more second, with a new throttled key: the page must follow.
	liveLoad(t, srv.URL, seconds+1)
	svc.step(base.Add((seconds+1)*time.Second), seconds+1)
	for range 55 {
		take(t, srv.URL, "777700008888", "DescribeTaskDefinition")
	}
	clock.Advance(time.Second)
	rec.Tick(base.Add((seconds + 1) * time.Second))
	view = waitForPage(t, br, base.Add((seconds+1)*time.Second))
	found := false
	for _, h := range view.Hot {
		found = found || h.Account == "777700008888"
	}
	if !found {
		t.Errorf("the page's hot buckets %+v lack the newly throttled 777700008888", view.Hot)
	}
	checkPage(t, srv.URL, view)

	if msgs := br.Errors(); len(msgs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(msgs, "\n"))
	}
	// Token in sessionStorage, never in the URL.
	loc, err := chromedp.Run(br.Ctx, chromedp.Location())
	if err != nil || strings.Contains(loc, "tok") {
		t.Errorf("page URL %q (%v) must not carry the token", loc, err)
	}
	saveScreenshot(t, br, "ui.png")
}

// waitForPage polls the page until it shows the point ending at newest and
// at least one hot bucket, and returns what it shows.
func waitForPage(t *testing.T, br *browsertest.Browser, newest time.Time) pageView {
	t.Helper()
	want := strconv.FormatInt(newest.UnixMilli(), 10)
	var view pageView
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]byte](readPage))
		if err != nil {
			t.Fatal(err)
		}
		view = pageView{}
		if err := json.Unmarshal(raw, &view); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if view.Newest == want && len(view.Hot) > 0 {
			return view
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed the second ending %s: %+v; logged: %v", want, view, br.Errors())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPage compares what the page shows with the JSON endpoints.
func checkPage(t *testing.T, url string, view pageView) {
	t.Helper()
	var dec liveDecisions
	getJSON(t, url+"/v1/admin/live/decisions", "tok", &dec)
	last := len(dec.TimesMs) - 1
	if got := strconv.FormatInt(dec.TimesMs[last], 10); got != view.Newest {
		t.Fatalf("page shows the second ending %s, the endpoint %s", view.Newest, got)
	}
	shown := map[string]bool{}
	for _, r := range view.Rates {
		shown[r.Series] = true
	}
	for _, s := range dec.Series {
		id := s.Service + "/" + s.Category
		active := false
		for i := range s.Allowed {
			active = active || s.Allowed[i]+s.Throttled[i]+s.Errors[i] > 0
		}
		if active != shown[id] {
			t.Errorf("series %s: shown %v, but it had decisions: %v", id, shown[id], active)
		}
	}
	for _, r := range view.Rates {
		for _, s := range dec.Series {
			if s.Service+"/"+s.Category != r.Series {
				continue
			}
			ms := float64(dec.DurationsMs[last])
			want := [3]string{fmtRate(float64(s.Allowed[last]) * 1000 / ms), fmtRate(float64(s.Throttled[last]) * 1000 / ms), fmtRate(float64(s.Errors[last]) * 1000 / ms)}
			if got := [3]string{r.Allowed, r.Throttled, r.Errors}; got != want {
				t.Errorf("%s: page shows allowed/throttled/errors %v per second, endpoint says %v", r.Series, got, want)
			}
		}
	}

	var hot liveHot
	getJSON(t, url+"/v1/admin/live/hot?n=10", "tok", &hot)
	if len(view.Hot) != len(hot.Buckets) {
		t.Fatalf("page shows %d hot buckets, endpoint %d", len(view.Hot), len(hot.Buckets))
	}
	for i, b := range hot.Buckets {
		got := view.Hot[i]
		want := fmt.Sprintf("%d / %d", *b.Tokens, b.Capacity)
		if got.Key != b.Key || got.Account != b.Account || got.Rate != fmtRate(b.ThrottlesPerSecond) || got.Tokens != want {
			t.Errorf("hot bucket %d: page %+v, endpoint %s %s/s %s", i, got, b.Key, fmtRate(b.ThrottlesPerSecond), want)
		}
	}
	if view.Hot[0].Account != "999900001111" {
		t.Errorf("hottest bucket on the page is %s, want the hammered 999900001111", view.Hot[0].Key)
	}
	if view.Store["kind"] != "memory" || view.Store["state"] != "ok" {
		t.Errorf("store panel %v, want memory, ok", view.Store)
	}

	var sc liveAutoscaled
	getJSON(t, url+"/v1/admin/live/autoscaled", "tok", &sc)
	if len(view.Pools) != len(sc.Services) || len(sc.Services) != 1 {
		t.Fatalf("page shows %d autoscaled services, endpoint %d (want 1)", len(view.Pools), len(sc.Services))
	}
	s, p := sc.Services[0], view.Pools[0]
	k := len(sc.TimesMs) - 1
	want := map[string]string{
		"driver": s.Driver, "recommended": strconv.Itoa(s.Recommended[k]), "ready": strconv.Itoa(s.Instances["ready"][k]),
		"pending": strconv.Itoa(s.Pending[k]), "429/s": fmtRate(float64(s.Rejected[k]) * 1000 / float64(sc.DurationsMs[k])),
	}
	if p.Service != s.Name || fmt.Sprint(p.Facts) != fmt.Sprint(want) {
		t.Errorf("service %s: page shows %v, endpoint %v", p.Service, p.Facts, want)
	}
	if len(p.Scales) != len(s.Scales) || len(s.Scales) == 0 {
		t.Fatalf("page lists %d scale decisions, endpoint %d", len(p.Scales), len(s.Scales))
	}
	// The revisions' legend names each with its percent and tags, and
	// each has a line: both revisions of the split.
	var names []string
	for _, rv := range s.Revisions {
		names = append(names, strings.Join(append([]string{rv.Name, strconv.Itoa(rv.Percent) + " %"}, rv.Tags...), " "))
		if !slices.Contains(p.Lines, rv.Name) {
			t.Errorf("the revisions chart has no line for %s (lines %q)", rv.Name, p.Lines)
		}
	}
	if want := []string{"orders-api-00001 90 %", "orders-api-00002 10 % canary"}; !slices.Equal(names, want) || !slices.Equal(p.Revisions, want) {
		t.Errorf("revisions: page shows %q, endpoint %q, want %q", p.Revisions, names, want)
	}
	for i, d := range s.Scales { // the page lists the newest first
		row := p.Scales[len(p.Scales)-1-i]
		if row[1] != fmt.Sprintf("%d → %d", d.From, d.To) || row[2] != d.Driver || row[3] != d.Reason {
			t.Errorf("scale decision %d: page %q, endpoint %+v", i, row, d)
		}
	}
}

// fakeScaler is the state of one autoscaled service that the test scripts
// second by second (the recorder's input; the pool's own adapter is tested
// with real instances in cmd/tollgate): one instance, three from second
// 200 (two starting for 3 s, requests pending and a few 429s meanwhile),
// two from second 450 (one draining for 5 s), when a canary revision
// orders-api-00002 takes 10 % and one of them.
type fakeScaler struct {
	mu     sync.Mutex
	now    liveview.ServiceSample
	scales []liveview.ScaleDecision
}

func (f *fakeScaler) step(at time.Time, s int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := liveview.ServiceSample{Name: "orders-api", Instances: map[string]int{"ready": 1}, Recommended: 1, Driver: "concurrency", Rejected: f.now.Rejected}
	switch {
	case s == 200:
		f.scales = append(f.scales, liveview.ScaleDecision{Time: at, From: 1, To: 3, Driver: "concurrency", Reason: "concurrency asked for 3 (need 2.60)"})
		fallthrough
	case s > 200 && s < 203:
		x.Instances = map[string]int{"ready": 1, "starting": 2}
		x.Recommended, x.Pending = 3, 4
		x.Rejected += 2
	case s >= 203 && s < 450:
		x.Instances = map[string]int{"ready": 3}
		x.Recommended = 3
	case s >= 450:
		if s == 450 {
			f.scales = append(f.scales, liveview.ScaleDecision{Time: at, From: 3, To: 2, Driver: "cpu", Reason: "cpu asked for 2 (need 1.40)"})
		}
		x.Instances = map[string]int{"ready": 2}
		if s < 455 {
			x.Instances["draining"] = 1
		}
		x.Recommended, x.Driver = 2, "cpu"
	}
	x.Scales = slices.Clone(f.scales)
	x.Revisions = []liveview.RevisionSample{{Name: "orders-api-00001", Percent: 100, Instances: x.Instances["ready"] + x.Instances["starting"]}}
	if s >= 450 { // a canary takes 10 %, from one of the instances
		x.Revisions = []liveview.RevisionSample{{Name: "orders-api-00001", Percent: 90, Instances: 1 + x.Instances["draining"]},
			{Name: "orders-api-00002", Percent: 10, Tags: []string{"canary"}, Instances: 1}}
	}
	f.now = x
}

func (f *fakeScaler) sample() []liveview.ServiceSample {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now.Name == "" {
		return nil
	}
	return []liveview.ServiceSample{f.now}
}

// saveScreenshot saves the page as a test artifact, and into
// $TOLLGATE_SCREENSHOTS when set.
func saveScreenshot(t *testing.T, br *browsertest.Browser, name string) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name)
	if err := br.Screenshot(path); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if dir := os.Getenv(screenshotsEnv); dir != "" {
		if err := br.Screenshot(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUIRefusedToken gives the page a wrong token: it must ask again, say
// why, and keep nothing in sessionStorage.
func TestUIRefusedToken(t *testing.T) {
	t.Parallel() // its own servers
	br := browsertest.Start(t, 900, 600)
	_, srv := newTestServer(t, limitertest.NewClock(), Options{AdminToken: "tok", Live: liveview.New(liveview.Options{})})
	err := chromedp.Do(br.Ctx,
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible("#login"),
		chromedp.SendKeys("#token", "wrong"),
		chromedp.Click(`#login button[type="submit"]`),
		chromedp.WaitVisible("#login"),
	)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]string](
			`[document.getElementById("login-error").textContent, String(sessionStorage.getItem("tollgate-admin-token")), String(document.getElementById("live").hidden)]`))
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != "" {
			if !strings.Contains(got[0], "refused") || got[1] != "null" || got[2] != "true" {
				t.Errorf("after a wrong token: message %q, stored token %s, data hidden %s; want a refusal, nothing stored, data hidden", got[0], got[1], got[2])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the page never said the token was refused")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
