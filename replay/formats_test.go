package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
)

// ctRecord is one CloudTrail record of account 111122223333 at second sec
// after 12:00.
func ctRecord(sec int, action, errorCode string) string {
	e := ""
	if errorCode != "" {
		e = `,"errorCode":"` + errorCode + `"`
	}
	return fmt.Sprintf(`{"eventVersion":"1.08","eventTime":"2026-11-30T12:00:%02dZ","eventSource":"ecs.amazonaws.com","eventName":%q,"awsRegion":"us-east-1","userIdentity":{"type":"IAMUser","accountId":"111122223333","accessKeyId":"AKIAFORMATS"},"sourceIPAddress":"203.0.113.9","userAgent":"aws-cli/2.15"%s,"requestParameters":{"launchType":"FARGATE","count":2}}`, sec, action, e)
}

// TestEveryCloudTrailLayoutReplaysAlike: the same 60 records as AWS
// delivers them, as JSON lines, as lookup-events prints them (newest
// first, each record a string), as Lake's query results, and as the
// console's CSV (with and without its CloudTrail event column) give the
// same buckets.
func TestEveryCloudTrailLayoutReplaysAlike(t *testing.T) {
	var recs []string
	for i := range 60 {
		action := "ListClusters"
		if i%3 == 0 {
			action = "RunTask"
		}
		recs = append(recs, ctRecord(i, action, ""))
	}
	var events, rows []string
	csvWhole := "Event ID,Event time,User name,Event name,Event source,AWS access key,AWS region,Error code,CloudTrail event\n"
	csvCols := "Event ID,Event time,User name,Event name,Resource type,Event source,AWS access key,AWS region,Error code,Source IP address\n"
	for i := len(recs) - 1; i >= 0; i-- {
		s, _ := json.Marshal(recs[i])
		events = append(events, `{"EventId":"e`+fmt.Sprint(i)+`","EventName":"x","ReadOnly":"true","CloudTrailEvent":`+string(s)+`}`)
		var m struct {
			EventTime, EventSource, EventName, AwsRegion string
		}
		json.Unmarshal([]byte(recs[i]), &m)
		rows = append(rows, fmt.Sprintf(`[{"eventTime":%q},{"eventSource":%q},{"eventName":%q},{"awsRegion":%q},{"accountId":"111122223333"},{"requestParameters":"{\"launchType\":\"FARGATE\",\"count\":2}"}]`,
			strings.Replace(m.EventTime, "T", " ", 1)[:19]+".000", m.EventSource, m.EventName, m.AwsRegion))
		q := strings.ReplaceAll(recs[i], `"`, `""`)
		csvWhole += fmt.Sprintf("e%d,%s,alice,%s,ecs.amazonaws.com,AKIAFORMATS,us-east-1,,\"%s\"\n", i, m.EventTime, m.EventName, q)
		csvCols += fmt.Sprintf("e%d,%s,alice,%s,,ecs.amazonaws.com,AKIAFORMATS,us-east-1,,203.0.113.9\n", i, m.EventTime, m.EventName)
	}
	layouts := map[string]string{
		"lookup-events": "{\n    \"Events\": [\n        " + strings.Join(events, ",\n        ") + "\n    ],\n    \"NextToken\": \"abc\"\n}\n",
		"lake":          `{"QueryStatus":"FINISHED","QueryStatistics":{"ResultsCount":60},"QueryResultRows":[` + strings.Join(rows, ",") + `]}`,
		"console csv":   csvWhole,
	}
	want := reportOf(t, []Input{input("delivered.json", recordsFile(recs))})
	if lines := reportOf(t, []Input{input("lines.jsonl", joinLines(recs))}); lines != want {
		t.Errorf("JSON lines: %s\nwant %s", lines, want)
	}
	for name, log := range layouts {
		if got := reportOf(t, []Input{input(name, []byte(log))}); got != want {
			t.Errorf("%s: %s\nwant %s", name, got, want)
		}
	}
	// Without the event column the console's CSV has no account (the
	// access key stands for it, as in serve) nor requestParameters.
	r, err := Run([]Input{input("cols.csv", []byte(csvCols))}, Options{TempDir: t.TempDir()})
	if err != nil || r.Replayed != 60 || len(r.Errors) != 0 {
		t.Fatalf("CSV without the event column: %v, %d replayed, errors %v", err, r.Replayed, r.Errors)
	}
	if r.Buckets[0].Account != "AKIAFORMATS" {
		t.Errorf("CSV without the event column: account %q, want the access key", r.Buckets[0].Account)
	}
}

// TestNothingReplayedIsAnError: a file in no CloudTrail format, and a log
// whose every call is of a service the config lacks, are errors naming
// the formats read.
func TestNothingReplayedIsAnError(t *testing.T) {
	for name, log := range map[string]string{
		"access.log":    `127.0.0.1 - - [30/Nov/2026:12:00:00 +0000] "GET / HTTP/1.1" 200 5 "-" "curl"` + "\n",
		"other.json":    `{"hello":"world"}` + "\n",
		"dynamodb.json": strings.Replace(ctRecord(0, "DescribeTable", ""), "ecs.amazonaws.com", "dynamodb.amazonaws.com", 1), // no built-in table
		"events":        `{"Events":[]}`,
	} {
		r, err := Run([]Input{input(name, []byte(log))}, Options{TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(r.Errors, "\n")
		if r.Replayed != 0 || !strings.Contains(all, "lookup-events") || !strings.Contains(all, "CSV") {
			t.Errorf("%s: %d replayed, errors %q; want an error naming the formats", name, r.Replayed, r.Errors)
		}
	}
	if _, err := NewDecoder(strings.NewReader("GET / 200\n")); !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "get-query-results") {
		t.Errorf("an access log: %v", err)
	}
}

// TestThrottleCodesAsServicesLogThem: EC2 logs its throttle as
// Client.RequestLimitExceeded; a service of the config whose throttle
// is its own code (and HTTP 503, as EC2 answers) has it counted as a
// recorded throttle, not played.
func TestThrottleCodesAsServicesLogThem(t *testing.T) {
	cfg, err := config.Parse("ec2.yaml", []byte(`services:
  - name: ec2
    throttle: {code: Client.RequestLimitExceeded, message: Request limit exceeded., status: 503}
    categories:
      - {name: describe, capacity: 100, refill_per_second: 20, actions: [DescribeInstances]}
  - name: ecs2
    signing_name: ecs
    throttle: {code: SlowDownPlease, status: 429}
    categories:
      - {name: read, capacity: 50, refill_per_second: 20, actions: [ListClusters]}
`))
	if err != nil {
		t.Fatal(err)
	}
	ec2 := func(sec int, code string) string {
		return strings.Replace(ctRecord(sec, "DescribeInstances", code), "ecs.amazonaws.com", "ec2.amazonaws.com", 1)
	}
	log := strings.Join([]string{
		ec2(0, ""), ec2(1, "Client.RequestLimitExceeded"), ec2(2, "RequestLimitExceeded"), ec2(3, "Client.UnauthorizedOperation"),
		ctRecord(4, "ListClusters", "SlowDownPlease"), ctRecord(5, "ListClusters", "ThrottlingException"), ctRecord(6, "ListClusters", "AccessDenied"),
	}, "\n")
	r, err := Run([]Input{input("t.jsonl", []byte(log))}, Options{Quota: cfg.Quota, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, b := range r.Buckets {
		got[b.Service] = fmt.Sprintf("%d calls, %d recorded", b.Calls, b.Recorded)
	}
	if got["ec2"] != "2 calls, 2 recorded" || got["ecs2"] != "1 calls, 2 recorded" {
		t.Errorf("buckets %v; want ec2 2 calls, 2 recorded and ecs2 1 call, 2 recorded", got)
	}
	if _, err := config.Parse("bad.yaml", []byte("services:\n  - name: x\n    throttle: {code: X, status: 500}\n    categories: [{name: a, capacity: 1, refill_per_second: 1, actions: [A]}]\n")); err == nil || !strings.Contains(err.Error(), "or 503") {
		t.Errorf("status 500: %v, want an error allowing 4xx or 503", err)
	}
}

// FuzzDecoderLayouts: the layouts other than delivered files and JSON
// lines, from seeds of each, give records, skips or an error, never a
// panic, and a record returned has what a replay needs.
func FuzzDecoderLayouts(f *testing.F) {
	rec := ctRecord(1, "RunTask", "")
	s, _ := json.Marshal(rec)
	f.Add([]byte(`{"Events":[{"EventId":"1","CloudTrailEvent":` + string(s) + `},{"CloudTrailEvent":"{}"},{"x":1},[]],"NextToken":"n"}`))
	f.Add([]byte(`{"QueryStatus":"FINISHED","QueryResultRows":[[{"eventTime":"2026-11-30 12:00:00.000"},{"eventSource":"ecs.amazonaws.com"},{"eventName":"RunTask"},{"accountId":"1"},{"requestParameters":"{\"count\":3}"}],[1],{}]}`))
	f.Add([]byte("Event time,Event name,Event source,AWS access key,CloudTrail event\n2026-11-30T12:00:00Z,RunTask,ecs.amazonaws.com,AK,\"" + strings.ReplaceAll(rec, `"`, `""`) + "\"\n,,,\n\"unterminated\n"))
	f.Add([]byte("eventtime,eventname,eventsource,accountid\n2026-11-30T12:00:00Z,ListClusters,ecs.amazonaws.com,1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := NewDecoder(bytes.NewReader(b))
		if err != nil {
			return
		}
		var rec Record
		for range 10_000 {
			err := d.Next(&rec)
			var skip *SkipError
			switch {
			case err == nil:
				if rec.Time == 0 || rec.Source == "" || rec.Action == "" || (rec.Account == "" && rec.AccessKey == "") {
					t.Fatalf("record without what a replay needs: %+v", rec)
				}
			case errors.As(err, &skip):
			default:
				if err != io.EOF && err.Error() == "" {
					t.Fatal("an error without a message")
				}
				return
			}
		}
	})
}
