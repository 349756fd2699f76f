package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/replay/accessgen"
)

var updateAccessExample = flag.Bool("update-access-example", false, "rewrite examples/replay/access from accessgen")

// accessExample is examples/replay/access/hello.log.gz: nginx's log of
// requests to /hello/, 10 a second for a minute, 80 a second for 30 s,
// then 5 a second for 30 s, running 200, 400 and 800 ms in turn.
var accessExample = accessgen.Spec{
	Format:  "combined",
	Start:   time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	Path:    "/hello/greet",
	Phases:  []accessgen.Phase{{Duration: time.Minute, Rate: 10}, {Duration: 30 * time.Second, Rate: 80}, {Duration: 30 * time.Second, Rate: 5}},
	Service: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond},
}

const accessExamplePath = "../../examples/replay/access/hello.log.gz"

// The example access log is what accessgen writes for accessExample
// (go test -run AccessExample -update-access-example rewrites it).
func TestReplayAccessExampleIsGenerated(t *testing.T) {
	var want bytes.Buffer
	if err := accessgen.Write(&want, accessExample); err != nil {
		t.Fatal(err)
	}
	if *updateAccessExample {
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		zw.Write(want.Bytes())
		zw.Close()
		if err := os.MkdirAll(filepath.Dir(accessExamplePath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(accessExamplePath, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(accessExamplePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s is not what accessgen writes (%v); rerun with -update-access-example", accessExamplePath, err)
	}
}

// tollgate replay of an access log with the autoscale example's config
// routes every request to hello (route /hello/), and a sweep over three
// values prints three columns, the peak instances at most each value.
func TestReplayAccessLogSweep(t *testing.T) {
	page := filepath.Join(t.TempDir(), "scale.html")
	code, out, errs := runCmd("replay", "--config", "../../examples/autoscale/tollgate.yaml", "--sweep", "max_instances=2,5,20", "--html", page, accessExamplePath)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "<th>max_instances=20</th>") || strings.Count(string(b), "<svg") != 1 {
		t.Errorf("--html wrote %d bytes, %v", len(b), err)
	}
	for _, want := range []string{"1 inputs (1 combined), 3150 requests: 0 skipped lines, 0 unrouted", "service hello", "max_instances=2  max_instances=5  max_instances=20"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`(?m)^\s*instances peak\s+(\d+)\s+(\d+)\s+(\d+)\s*$`).FindStringSubmatch(out)
	if m == nil || m[1] != "2" || m[2] != "5" {
		t.Errorf("peaks %q, want 2, 5 and more\n%s", m, out)
	}
}

func TestReplayAccessErrors(t *testing.T) {
	unknown := filepath.Join(t.TempDir(), "iis.log")
	if err := os.WriteFile(unknown, []byte(strings.Repeat("2026-11-30 12:00:00 GET /hello 200 12\n", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay", accessExamplePath}, 1, "give --config with autoscaled services, or --service NAME"},
		{[]string{"replay", "--sweep", "cpu=1,2", accessExamplePath}, 2, "SETTING=V1,V2"},
		{[]string{"replay", "--sweep", "max_instances=1,x", accessExamplePath}, 2, `value "x"`},
		{[]string{"replay", "--format", "w3c", accessExamplePath}, 2, "--format"},
		{[]string{"replay", "--service", "hello", "--group", "a=1:none", accessExamplePath}, 2, "not access logs"},
		{[]string{"replay", "--service", "hello", "--html", "no-such-dir/x.html", accessExamplePath}, 1, "no-such-dir/x.html"},
		{[]string{"replay", "--config", "../../examples/autoscale/tollgate.yaml", "--service", "nope", accessExamplePath}, 1, `no autoscaled service "nope"`},
		{[]string{"replay", "--service", "one", "--format", "envoy", accessExamplePath}, 1, "none of its first 100 lines is a request"},
		{[]string{"replay", "--service", "one", unknown, accessExamplePath}, 1, "iis.log: not an access log replay reads"},
	} {
		code, out, errs := runCmd(tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%q: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out, errs)
		}
	}
}
