package gateway

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/internal/browsertest"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/liveview"
)

// freshView is what TestUIFreshServer reads off the page: the texts a
// newcomer reads first, and the leftmost point of every chart.
type freshView struct {
	Newest      string    `json:"newest"`
	RatesHidden bool      `json:"ratesHidden"`
	RatesEmpty  string    `json:"ratesEmpty"` // "" when hidden
	Spans       []string  `json:"spans"`      // the decisions titles' spans
	HotWindow   string    `json:"hotWindow"`
	HotHidden   bool      `json:"hotHidden"`
	HotEmpty    string    `json:"hotEmpty"` // "" when hidden
	PoolsSpan   string    `json:"poolsSpan"`
	PoolLabel   string    `json:"poolLabel"`
	PoolDriver  string    `json:"poolDriver"`
	Scales      []string  `json:"scales"`
	Rows        int       `json:"rows"`
	MinX        []float64 `json:"minX"` // per rates chart, the leftmost point's x in [0, 600]
}

const readFresh = `(() => {
  const shown = (id) => document.getElementById(id).hidden ? "" : document.getElementById(id).textContent;
  return {
    newest: document.getElementById("status").dataset.newest || "",
    ratesHidden: document.getElementById("rates").hidden,
    ratesEmpty: shown("rates-empty"),
    spans: [...document.querySelectorAll(".rates-span")].map((e) => e.textContent),
    hotWindow: document.getElementById("hot-window").textContent,
    hotHidden: document.getElementById("hot").hidden,
    hotEmpty: shown("hot-empty"),
    poolsSpan: document.getElementById("pools-span").textContent,
    poolLabel: (document.querySelector("#pools .pool .peak") || {}).textContent || "",
    poolDriver: (document.querySelector('#pools .facts [data-field="driver"]') || {}).textContent || "",
    scales: [...document.querySelectorAll("#pools table.scales tbody tr")].map((tr) => tr.textContent),
    rows: document.querySelectorAll("#rates tbody tr").length,
    minX: [...document.querySelectorAll("#rates svg.spark")].map((svg) =>
      Math.min(...[...svg.querySelectorAll("polyline")].flatMap((pl) => pl.getAttribute("points").split(" ").map((p) => parseFloat(p))))),
  };
})()`

// TestUIFreshServer opens the live page of a server that has just started,
// as a newcomer does: first with no decision at all and an autoscaled
// service that has never run, then after 20 seconds of load. Every empty
// panel must say why it is empty, every title must name the time its
// panel covers, the same way its empty message does, and the charts must
// span what the server has seen (at least a minute), not 10 minutes.
func TestUIFreshServer(t *testing.T) {
	t.Parallel() // its own servers
	br := browsertest.Start(t, 1200, 900)
	clock := limitertest.NewClock()
	idle := func() []liveview.ServiceSample {
		return []liveview.ServiceSample{{Name: "hello", Instances: map[string]int{}, Driver: "none"}}
	}
	rec := liveview.New(liveview.Options{Services: idle})
	_, srv := newTestServer(t, clock, Options{AdminToken: "tok", Live: rec})

	const quiet, loaded = 3, 20
	base := time.Now().Truncate(time.Second).Add(-(quiet + loaded) * time.Second)
	for s := 1; s <= quiet; s++ {
		clock.Advance(time.Second)
		rec.Tick(base.Add(time.Duration(s) * time.Second))
	}
	err := chromedp.Do(br.Ctx,
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible("#login"),
		chromedp.SendKeys("#token", "tok"),
		chromedp.Click(`#login button[type="submit"]`),
		chromedp.WaitVisible("#live"),
	)
	if err != nil {
		t.Fatal(err)
	}
	v := waitForFresh(t, br, base.Add(quiet*time.Second))
	if !v.RatesHidden || !strings.Contains(v.RatesEmpty, "No throttling decision yet") || !strings.Contains(v.RatesEmpty, "/v1/take") {
		t.Errorf("no decision yet: rates table hidden %v, message %q; want the table hidden and a message saying how to make one", v.RatesHidden, v.RatesEmpty)
	}
	if want := "since the server started, 3 s ago"; v.HotWindow != want || !v.HotHidden || v.HotEmpty != "No request was throttled "+want+"." {
		t.Errorf("nothing throttled: hot title %q, table hidden %v, message %q; want %q in both and the table hidden", v.HotWindow, v.HotHidden, v.HotEmpty, want)
	}
	if v.PoolsSpan != "last minute" || !strings.Contains(v.PoolLabel, "no instance") || !strings.Contains(v.PoolLabel, "first request starts one") || v.PoolDriver != "–" {
		t.Errorf("a service that never ran: span %q, chart label %q, driver %q; want last minute, a label saying the first request starts an instance, and a dash", v.PoolsSpan, v.PoolLabel, v.PoolDriver)
	}
	if len(v.Scales) != 1 || !strings.Contains(v.Scales[0], "no scale decision yet") {
		t.Errorf("scale decisions %q, want one row saying there is none yet", v.Scales)
	}
	saveScreenshot(t, br, "ui-fresh.png")

	for s := quiet + 1; s <= quiet+loaded; s++ {
		liveLoad(t, srv.URL, s)
		clock.Advance(time.Second)
		rec.Tick(base.Add(time.Duration(s) * time.Second))
	}
	v = waitForFresh(t, br, base.Add((quiet+loaded)*time.Second))
	if v.RatesHidden || v.RatesEmpty != "" || v.Rows == 0 {
		t.Errorf("after load: rates table hidden %v with %d rows, empty message %q", v.RatesHidden, v.Rows, v.RatesEmpty)
	}
	for _, sp := range v.Spans {
		if sp != "last minute" {
			t.Errorf("a decisions title says %q after 23 s, want last minute (the shortest span)", sp)
		}
	}
	// 23 points on a minute-wide chart of 600 units: the load's first
	// second (and the zero before it) sits 20 s from the right, at 400; on
	// a 10-minute chart it would sit at 580.
	for i, x := range v.MinX {
		if x < 350 || x > 450 {
			t.Errorf("chart %d starts at x = %.1f of 600, want ≈ 400 (a minute-wide chart)", i, x)
		}
	}
	if want := "since the server started, 23 s ago"; v.HotWindow != want || v.HotHidden || v.HotEmpty != "" {
		t.Errorf("after load: hot title %q (want %q), table hidden %v, empty message %q", v.HotWindow, want, v.HotHidden, v.HotEmpty)
	}
	if msgs := br.Errors(); len(msgs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(msgs, "\n"))
	}
}

// waitForFresh polls the page until it shows the point ending at newest.
func waitForFresh(t *testing.T, br *browsertest.Browser, newest time.Time) freshView {
	t.Helper()
	want := strconv.FormatInt(newest.UnixMilli(), 10)
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]byte](readFresh))
		if err != nil {
			t.Fatal(err)
		}
		var v freshView
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if v.Newest == want {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed the second ending %s: %+v; logged: %v", want, v, br.Errors())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
