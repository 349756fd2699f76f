package replay

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/replay/ctgen"
)

// The HTML page holds the table, the overrides and what was not played,
// escaped, and loads nothing.
func TestWriteHTML(t *testing.T) {
	s := acceptance
	s.Duration = 2 * time.Minute
	s.Tenants = append(s.Tenants, ctgen.Tenant{Account: "111122223333", Source: "<script>.amazonaws.com", Action: "X", Rate: 1})
	log := append(gen(t, s), []byte("\n")...)
	r, err := Run([]Input{input("a.json", log), input("bad & worse.json", []byte("nope"))}, Options{Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"<!doctype html>", "<style>", `<td class="name">111122223333</td>`, "<td>500</td>", // 2 × 250 throttled
		"&lt;script&gt;.amazonaws.com: 120", "bad &amp; worse.json: not a CloudTrail log",
		`account: &#34;111122223333&#34;, region: us-east-1, category: cluster-read, capacity: 300, refill_per_second: 5}`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	for _, bad := range []string{"<script>", "src=", "http://", "https://", "<link"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
}
