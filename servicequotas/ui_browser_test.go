package servicequotas_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas/types"
	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/internal/browsertest"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/servicequotas"
)

// quotaPanels is what the test reads off the live page's quota panels.
type quotaPanels struct {
	Updated string
	Pending []struct{ ID, Account, Asked, Reason string }
	Decided []struct{ ID, Status, Reason string }
	Usage   []struct{ Account, Category, Throttled, Peak string }
	Result  string
}

const readQuotaPanels = `(() => ({
  Updated: document.getElementById("status").textContent,
  Pending: [...document.querySelectorAll("#requests tbody tr")].map((tr) => ({
    ID: tr.dataset.id, Account: tr.querySelector(".account").textContent,
    Asked: tr.querySelector(".asked").textContent, Reason: tr.querySelector("input.reason").value,
  })),
  Decided: [...document.querySelectorAll("#decided tbody tr")].map((tr) => ({
    ID: tr.dataset.id, Status: tr.querySelector(".status").textContent, Reason: tr.querySelector(".reason").textContent,
  })),
  Usage: [...document.querySelectorAll("#usage tbody tr")].map((tr) => ({
    Account: tr.querySelector(".account").textContent, Category: tr.querySelector(".category").textContent,
    Throttled: tr.querySelector(".throttled").textContent, Peak: tr.querySelector(".peak-use").textContent,
  })),
  Result: document.getElementById("requests-result").textContent,
}))()`

// TestUIApprovesRequests opens /ui in a headless browser with two
// pending increase requests: the page lists them and the tenants'
// utilisation, keeps a reason being typed (and its field's focus) across
// its polls and a third request's arrival, and approves
// one and denies the other through the admin endpoint, with the token
// the operator pasted.
func TestUIApprovesRequests(t *testing.T) {
	t.Parallel() // its own node and browser
	br := browsertest.Start(t, 1200, 1100)
	clock := limitertest.NewClock()
	n, rec := newLiveNode(t, clock)
	ctx := context.Background()
	if got := burst(t, n.ecs("AKIDHOT"), 60); got != 50 {
		t.Fatalf("%d of 60 allowed, want 50", got)
	}
	burst(t, n.ecs("AKIDCALM"), 5)
	burstCode := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	request := func(key, code string, v float64) string {
		out, err := n.quotas(key).RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{
			ServiceCode: aws.String("ecs"), QuotaCode: aws.String(code), DesiredValue: aws.Float64(v)})
		if err != nil || out.RequestedQuota.Status != types.RequestStatusPending {
			t.Fatalf("request: %+v %v", out, err)
		}
		return aws.ToString(out.RequestedQuota.Id)
	}
	hotID := request("AKIDHOT", burstCode, 100)
	calmID := request("AKIDCALM", servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Rate), 400)
	rec.Tick(time.Now())

	err := chromedp.Do(br.Ctx,
		chromedp.Navigate(n.srv.URL+"/ui/"),
		chromedp.WaitVisible("#login"),
		chromedp.SendKeys("#token", adminToken),
		chromedp.Click(`#login button[type="submit"]`),
		chromedp.WaitVisible("#requests"),
	)
	if err != nil {
		t.Fatal(err)
	}
	read := func() quotaPanels {
		t.Helper()
		raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]byte](readQuotaPanels))
		if err != nil {
			t.Fatal(err)
		}
		var p quotaPanels
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		return p
	}
	waitFor := func(what string, ok func(quotaPanels) bool) quotaPanels {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			p := read()
			if ok(p) {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page never showed %s: %+v; logged: %v", what, p, br.Errors())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	p := waitFor("both requests and the usage", func(p quotaPanels) bool { return len(p.Pending) == 2 && len(p.Usage) >= 2 })
	byID := map[string]string{}
	for _, r := range p.Pending {
		byID[r.ID] = r.Account + " " + r.Asked
	}
	if byID[hotID] != "AKIDHOT 50 → 100" || byID[calmID] != "AKIDCALM 20 → 400" {
		t.Errorf("pending rows %+v, want AKIDHOT 50 → 100 and AKIDCALM 20 → 400", p.Pending)
	}
	if u := p.Usage[0]; u.Account != "AKIDHOT" || u.Category != "cluster-read" || u.Throttled != "10" || u.Peak != "50 / 50 (100%)" {
		t.Errorf("first usage row %+v, want AKIDHOT's cluster-read: 10 throttled, 50 / 50 at its peak", u)
	}
	found := false
	for _, u := range p.Usage {
		found = found || u.Account == "AKIDCALM" && u.Category == "cluster-read" && u.Throttled == "0" && u.Peak == "5 / 50 (10%)"
	}
	if !found {
		t.Errorf("usage %+v lacks AKIDCALM's cluster-read at 5 / 50", p.Usage)
	}

	// A reason typed survives the page's next polls, and so does the
	// field's focus: a third of it is typed, polls redraw the page, a
	// third, a new request arrives (the rows change), and the rest, each
	// part going as key presses to whatever has the focus.
	const reason = "launch week, approved by platform"
	third := len(reason) / 3
	if err := chromedp.Do(br.Ctx, chromedp.SendKeys(`#requests tr[data-id="`+hotID+`"] input.reason`, reason[:third])); err != nil {
		t.Fatal(err)
	}
	before := read().Updated
	waitFor("a poll", func(p quotaPanels) bool { return p.Updated != before })
	before = read().Updated
	waitFor("another poll", func(p quotaPanels) bool { return p.Updated != before })
	if err := chromedp.Do(br.Ctx, chromedp.KeyEvent(reason[third:2*third])); err != nil {
		t.Fatal(err)
	}
	newID := request("AKIDNEW", burstCode, 60)
	waitFor("the new request", func(p quotaPanels) bool { return len(p.Pending) == 3 })
	if err := chromedp.Do(br.Ctx, chromedp.KeyEvent(reason[2*third:])); err != nil {
		t.Fatal(err)
	}
	before = read().Updated
	p = waitFor("one more poll", func(p quotaPanels) bool { return p.Updated != before })
	for _, r := range p.Pending {
		if r.ID == hotID && r.Reason != reason {
			t.Fatalf("the reason field holds %q after a poll, want %q", r.Reason, reason)
		}
	}
	saveShot(t, br, "ui-quotas.png")

	if err := chromedp.Do(br.Ctx, chromedp.Click(`#requests tr[data-id="`+hotID+`"] button.approve`)); err != nil {
		t.Fatal(err)
	}
	p = waitFor("the approval", func(p quotaPanels) bool { return len(p.Pending) == 2 && len(p.Decided) == 1 })
	if d := p.Decided[0]; d.ID != hotID || d.Status != "APPROVED" || d.Reason != reason || !strings.Contains(p.Result, "Approved "+hotID) {
		t.Errorf("after approving: decided %+v, result %q", p.Decided, p.Result)
	}
	if err := chromedp.Do(br.Ctx,
		chromedp.SendKeys(`#requests tr[data-id="`+calmID+`"] input.reason`, "use a second account"),
		chromedp.Click(`#requests tr[data-id="`+calmID+`"] button.deny`)); err != nil {
		t.Fatal(err)
	}
	p = waitFor("the denial", func(p quotaPanels) bool { return len(p.Pending) == 1 && len(p.Decided) == 2 })
	if p.Pending[0].ID != newID {
		t.Errorf("pending after both decisions: %+v, want only %s", p.Pending, newID)
	}
	if d := p.Decided[0]; d.ID != calmID || d.Status != "DENIED" || d.Reason != "use a second account" {
		t.Errorf("after denying: decided %+v", p.Decided)
	}
	saveShot(t, br, "ui-quotas-decided.png")

	// The tenants see the decisions, and the approved burst is live.
	for id, want := range map[string]types.RequestStatus{hotID: types.RequestStatusApproved, calmID: types.RequestStatusDenied} {
		key := "AKIDHOT"
		if id == calmID {
			key = "AKIDCALM"
		}
		got, err := n.quotas(key).GetRequestedServiceQuotaChange(ctx, &sq.GetRequestedServiceQuotaChangeInput{RequestId: aws.String(id)})
		if err != nil || got.RequestedQuota.Status != want {
			t.Errorf("request %s: %+v %v, want %s", id, got, err, want)
		}
	}
	clock.Advance(10 * time.Second)
	if got := burst(t, n.ecs("AKIDHOT"), 150); got != 100 {
		t.Errorf("after the approval a burst passes %d, want the approved 100", got)
	}
	if msgs := br.Errors(); len(msgs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(msgs, "\n"))
	}
}

// saveShot saves the page as a test artifact, and into
// $TOLLGATE_SCREENSHOTS when set.
func saveShot(t *testing.T, br *browsertest.Browser, name string) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name)
	if err := br.Screenshot(path); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if dir := os.Getenv("TOLLGATE_SCREENSHOTS"); dir != "" {
		if err := br.Screenshot(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}
