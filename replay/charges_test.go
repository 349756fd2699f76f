package replay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sim"
)

// TestFargateRunTaskChargesItsBuckets: 30 RunTasks launching 10 Fargate
// tasks each in one second, read from requestParameters (as a CloudTrail
// object, and as the string of one, as Athena's table holds it): ECS's
// bucket admits them all, Fargate's On-Demand tasks bucket (100) only
// the first 10, and the 20 others are throttled by it, counted on
// RunTask's own category too, as tollgate serve counts them.
func TestFargateRunTaskChargesItsBuckets(t *testing.T) {
	for _, params := range []string{
		`{"cluster":"prod","launchType":"FARGATE","count":10}`,
		`"{\"cluster\":\"prod\",\"launchType\":\"FARGATE\",\"count\":10}"`,
	} {
		var b strings.Builder
		for range 30 {
			fmt.Fprintf(&b, `{"eventTime":"2026-11-30T12:00:00Z","eventSource":"ecs.amazonaws.com","eventName":"RunTask","awsRegion":"us-east-1","userIdentity":{"accountId":"111122223333"},"requestParameters":%s}`+"\n", params)
		}
		rep, err := Run([]Input{input("lines.json", []byte(b.String()))}, Options{
			Groups: []Group{{Name: "once", Retry: sim.Retry{Disabled: true}}}, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, bk := range rep.Buckets {
			got[bk.Category] = fmt.Sprintf("%d calls, %d throttled", bk.Calls, bk.Throttled)
		}
		want := map[string]string{
			"cluster-resource-modify": "30 calls, 20 throttled",
			"fargate-run-task":        "30 calls, 0 throttled",
			"fargate-on-demand-tasks": "30 calls, 20 throttled",
		}
		for cat, w := range want {
			if got[cat] != w {
				t.Errorf("%s: %s: %q, want %q (all: %v)", params, cat, got[cat], w, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: buckets %v, want %v", params, got, want)
		}
	}
}

// TestRefusedRunTaskIsNotPlayed: a RunTask of 11 tasks is refused as
// serve refuses it, named in the report, and takes nothing.
func TestRefusedRunTaskIsNotPlayed(t *testing.T) {
	rec := `{"eventTime":"2026-11-30T12:00:00Z","eventSource":"ecs.amazonaws.com","eventName":"RunTask","awsRegion":"us-east-1","userIdentity":{"accountId":"111122223333"},"requestParameters":{"launchType":"FARGATE","count":11}}`
	rep, err := Run([]Input{input("lines.json", []byte(rec+"\n"))}, Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Refused != 1 || rep.Replayed != 0 || len(rep.RefusedSamples) != 1 || !strings.Contains(rep.RefusedSamples[0], "count must be between 1 and 10") {
		t.Fatalf("refused %d %v, replayed %d; want the one call refused for its count", rep.Refused, rep.RefusedSamples, rep.Replayed)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "1 calls refused as invalid requests") {
		t.Errorf("the text does not name the refused call:\n%s", text.String())
	}
}
