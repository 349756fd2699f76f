package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReplayTheFormatsPeopleHave: a lookup-events capture, nginx's own
// combined log with --request-time, and an nginx log of a custom
// log_format are replayed; a file of something else is an error naming
// the formats, exit status 1.
func TestReplayTheFormatsPeopleHave(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noon := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var events []string
	for i := 59; i >= 0; i-- { // newest first, as lookup-events lists them
		rec := fmt.Sprintf(`{"eventTime":"%s","eventSource":"ecs.amazonaws.com","eventName":"DescribeClusters","awsRegion":"us-east-1","userIdentity":{"accountId":"111122223333"}}`,
			noon.Add(time.Duration(i)*time.Second/2).Format(time.RFC3339))
		s, _ := json.Marshal(rec)
		events = append(events, `{"EventId":"`+fmt.Sprint(i)+`","EventName":"DescribeClusters","CloudTrailEvent":`+string(s)+`}`)
	}
	lookup := write("lookup.json", "{\n    \"Events\": [\n        "+strings.Join(events, ",\n        ")+"\n    ]\n}\n")
	var combined, custom strings.Builder
	for i := range 100 {
		at := noon.Add(time.Duration(i) * 100 * time.Millisecond)
		combined.WriteString(at.Format(`203.0.113.7 - - [02/Jan/2006:15:04:05 -0700] "GET /hello/x HTTP/1.1" 200 5 "-" "curl/8"`) + "\n")
		custom.WriteString(at.Format(`2006-01-02T15:04:05.000Z07:00 host=hello.example.com "GET /hello/y HTTP/1.1" status=200 rt=0.080`) + "\n")
	}
	defaultLog := write("access.log", combined.String())
	customLog := write("custom.log", custom.String())
	other := write("notes.txt", "these are not the logs you are looking for\n")

	code, out, errs := runCmd("replay", lookup)
	if code != 0 || !strings.Contains(out, "60 calls replayed") {
		t.Errorf("lookup-events: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCmd("replay", "--service", "hello", "--request-time", "100ms", defaultLog)
	if code != 0 || !strings.Contains(out, "100 requests") || !strings.Contains(errs, "assumed to run 100ms") {
		t.Errorf("nginx combined with --request-time: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCmd("replay", "--service", "hello", "--log-format", `$time_iso8601 host=$host "$request" status=$status rt=$request_time`, customLog)
	if code != 0 || !strings.Contains(out, "100 requests: 0 skipped") {
		t.Errorf("custom log_format: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCmd("replay", other)
	if code == 0 || !strings.Contains(errs, "lookup-events") || !strings.Contains(errs, "notes.txt") {
		t.Errorf("a file of something else: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = runCmd("replay", "--service", "hello", "--log-format", `$remote_addr $request_time`, defaultLog)
	if code != 2 || !strings.Contains(errs, "no variable of the time") {
		t.Errorf("a log_format without a time: exit %d\n%s", code, errs)
	}
}
