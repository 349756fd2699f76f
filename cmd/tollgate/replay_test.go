package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/replay/ctgen"
	"github.com/tollgate/tollgate/servicequotas"
)

var updateReplayExample = flag.Bool("update-replay-example", false, "rewrite examples/replay/logs from ctgen")

// replayExample is the shape of examples/replay/logs: a tenant bursting
// 300 DescribeClusters at once every minute (a CloudTrail file, gzipped,
// per two minutes), and one steady at 25 ListClusters a second (an export
// of one record a line), on ECS's cluster-read bucket (50 tokens, 20 a
// second).
var replayExample = map[string]ctgen.Spec{
	"111122223333_CloudTrail_us-east-1_20261130T1200Z.json.gz": {Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Duration: 2 * time.Minute,
		Tenants: []ctgen.Tenant{{Account: "111122223333", AccessKey: "AKIAIOSFODNN7BURST1", Action: "DescribeClusters", Burst: 300, Every: time.Minute}}},
	"111122223333_CloudTrail_us-east-1_20261130T1158Z.json.gz": {Start: time.Date(2026, 11, 30, 11, 58, 0, 0, time.UTC), Duration: 2 * time.Minute,
		Tenants: []ctgen.Tenant{{Account: "111122223333", AccessKey: "AKIAIOSFODNN7BURST1", Action: "DescribeClusters", Burst: 300, Every: time.Minute}}},
	"lake-export-444455556666.jsonl.gz": {Start: time.Date(2026, 11, 30, 11, 59, 0, 0, time.UTC), Duration: time.Minute, Lines: true,
		Tenants: []ctgen.Tenant{{Account: "444455556666", AccessKey: "AKIAIOSFODNN7STEADY", Action: "ListClusters", Rate: 25}}},
}

// The files under examples/replay/logs are what ctgen writes for
// replayExample (go test -run ReplayExample -update-replay-example
// rewrites them).
func TestReplayExampleFilesAreGenerated(t *testing.T) {
	dir := "../../examples/replay/logs"
	for name, spec := range replayExample {
		var want bytes.Buffer
		if err := ctgen.Write(&want, spec); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if *updateReplayExample {
			data := want.Bytes()
			if strings.HasSuffix(name, ".gz") {
				var z bytes.Buffer
				zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
				zw.Write(data)
				zw.Close()
				data = z.Bytes()
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = f
		if strings.HasSuffix(name, ".gz") {
			if r, err = gzip.NewReader(f); err != nil {
				t.Fatal(err)
			}
		}
		got, err := io.ReadAll(r)
		f.Close()
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s is not what ctgen writes (%v); rerun with -update-replay-example", path, err)
		}
	}
}

// readmeReplayCommands returns the tollgate replay commands of the
// README's replay section and the comment after each.
func readmeReplayCommands(t *testing.T) [][2]string {
	t.Helper()
	section := docSection(t, "replay")
	var cmds [][2]string
	for _, m := range regexp.MustCompile(`(?m)^tollgate (replay [^#\n]*?)\s*(?:#\s*(.*))?$`).FindAllStringSubmatch(section, -1) {
		cmds = append(cmds, [2]string{m[1], m[2]})
	}
	if len(cmds) < 3 {
		t.Fatalf("README's replay section has %d tollgate replay commands, want at least 3", len(cmds))
	}
	return cmds
}

// The README's replay commands run as written, from the repository's
// root (an --html page goes to a temporary directory), and say what their
// comments promise: "N throttled" is the total
// of the table's throttled column, "exit 1" the status.
func TestReadmeReplayCommands(t *testing.T) {
	for _, c := range readmeReplayCommands(t) {
		var args []string
		for _, a := range strings.Fields(c[0]) {
			switch {
			case strings.HasPrefix(a, "examples/"):
				a = "../../" + a
			case len(args) > 0 && args[len(args)-1] == "--html":
				a = filepath.Join(t.TempDir(), filepath.Base(a)) // not the README's /tmp
			}
			args = append(args, a)
		}
		code, out, errs := runCmd(args...)
		if code != 0 {
			t.Errorf("tollgate %s: exit %d\n%s", c[0], code, errs)
			continue
		}
		if m := regexp.MustCompile(`peak (\d+) instances, (\d+) 429s`).FindStringSubmatch(c[1]); m != nil {
			for i, row := range []string{"instances peak", "429s at max instances"} {
				got := regexp.MustCompile(`(?m)^\s*` + row + `\s+(\d+)`).FindStringSubmatch(out)
				if got == nil || got[1] != m[i+1] {
					t.Errorf("tollgate %s: %s %q, the README says %s\n%s", c[0], row, got, m[i+1], out)
				}
			}
		}
		// "prints overrides: 300/5 and 50/24.5762713": each limit is an
		// override line of the output, and examples/replay/with-overrides.yaml
		// holds those very lines.
		if m := regexp.MustCompile(`overrides: (\d+)/(\S+) and (\d+)/(\S+)`).FindStringSubmatch(c[1]); m != nil {
			yaml, err := os.ReadFile("../../examples/replay/with-overrides.yaml")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range [][2]string{{m[1], m[2]}, {m[3], m[4]}} {
				want := "capacity: " + l[0] + ", refill_per_second: " + l[1] + "}"
				if !strings.Contains(out, want) || !strings.Contains(string(yaml), want) {
					t.Errorf("tollgate %s: the README says %s/%s; output or with-overrides.yaml lacks %q\n%s", c[0], l[0], l[1], want, out)
				}
			}
			_, printed, _ := strings.Cut(out, "overrides:\n")
			_, pasted, _ := strings.Cut(string(yaml), "overrides:\n")
			if printed != pasted {
				t.Errorf("with-overrides.yaml's overrides are not those printed:\n%s\nprinted:\n%s", pasted, printed)
			}
		}
		if m := regexp.MustCompile(`(\d+) throttled`).FindStringSubmatch(c[1]); m != nil {
			if got := throttledTotal(t, out); got != m[1] {
				t.Errorf("tollgate %s: %s throttled, the README says %s\n%s", c[0], got, m[1], out)
			}
		}
	}
}

// throttledTotal sums the throttled column of a replay's text report.
func throttledTotal(t *testing.T, out string) string {
	t.Helper()
	total := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !regexp.MustCompile(`^\d{12}$`).MatchString(f[0]) {
			continue
		}
		n, err := strconv.Atoi(f[5])
		if err != nil {
			t.Fatalf("throttled column %q: %v", f[5], err)
		}
		total += n
	}
	return strconv.Itoa(total)
}

func TestReplayCommandErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "cut.json.gz")
	data, err := os.ReadFile("../../examples/replay/logs/111122223333_CloudTrail_us-east-1_20261130T1158Z.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay"}, 2, "give the log files or directories"},
		{[]string{"replay", "--retry", "often", "x"}, 2, `retry policy "often": want default, none, or a number of attempts`},
		{[]string{"replay", "--group", "batch", "x"}, 2, "want NAME=ACCOUNT[,ACCOUNT...]:POLICY"},
		{[]string{"replay", "--window", "0s", "x"}, 2, "want a span of more than 0"},
		{[]string{"replay", "no-such-dir"}, 1, "tollgate replay: stat no-such-dir"},
		{[]string{"replay", "--config", "no-such.yaml", "../../examples/replay/logs"}, 1, "no-such.yaml"},
		{[]string{"replay", bad, "../../examples/replay/logs/lake-export-444455556666.jsonl.gz"}, 1, "tollgate replay: " + bad + ": record "},
	} {
		code, _, errs := runCmd(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("tollgate %s: exit %d, %q; want %d and %q", strings.Join(tc.args, " "), code, errs, tc.code, tc.want)
		}
	}
}

func TestReplayCommandJSON(t *testing.T) {
	page := filepath.Join(t.TempDir(), "replay.html")
	code, out, errs := runCmd("replay", "--json", "--html", page, "--retry", "none", "../../examples/replay/logs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Records int64
		Buckets []struct {
			Account    string
			Throttled  int64
			AdmitBurst int64   `json:"admit_burst"`
			AdmitRate  float64 `json:"admit_rate"`
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Records != 2700 || len(rep.Buckets) != 2 || rep.Buckets[0].Throttled != 1000 || rep.Buckets[0].AdmitBurst != 300 || rep.Buckets[0].AdmitRate != 5 || rep.Buckets[1].AdmitRate != 24.5762713 {
		t.Errorf("JSON report %+v", rep)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), `<td class="name">444455556666</td>`) {
		t.Errorf("--html wrote %d bytes, %v", len(b), err)
	}
	if code, _, errs := runCmd("replay", "--html", filepath.Join(page, "x"), "../../examples/replay/logs"); code != 1 || !strings.Contains(errs, "replay.html/x") {
		t.Errorf("--html in a file: exit %d, %s", code, errs)
	}
}

// --applied takes the admin API's list of values in force: the burst
// tenant's approved burst of 300 admits all its calls.
func TestReplayCommandApplied(t *testing.T) {
	dir := t.TempDir()
	applied := filepath.Join(dir, "applied.json")
	body := `{"applied":[{"account":"111122223333","region":"us-east-1","service_code":"ecs","quota_code":"` +
		servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst) + `","value":300}]}`
	if err := os.WriteFile(applied, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd("replay", "--applied", applied, "../../examples/replay/logs")
	if code != 0 || throttledTotal(t, out) != "270" || !strings.Contains(out, "300/20   1200          0") {
		t.Fatalf("exit %d, %s throttled, want 270 (the steady tenant's):\n%s%s", code, throttledTotal(t, out), out, errs)
	}
	if err := os.WriteFile(applied, []byte(`{"applied":[{"service_code":"ecs","quota_code":"L-0"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCmd("replay", "--applied", applied, "../../examples/replay/logs"); code != 1 || !strings.Contains(errs, applied+": applied value 1: no quota L-0") {
		t.Errorf("a quota the config lacks: exit %d, %s", code, errs)
	}
}

// The progress bar draws only on a terminal, and clears its line at the end.
func TestReplayProgress(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf) // not a terminal
	p.update(50, 100)
	p.done()
	if buf.Len() != 0 {
		t.Fatalf("drew %q on a buffer", buf.String())
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p = &progress{w: &buf, now: func() time.Time { return now }}
	p.update(50<<20, 100<<20)
	now = now.Add(199 * time.Millisecond)
	p.update(60<<20, 100<<20) // within 200 ms: not drawn
	p.done()
	if got := buf.String(); !strings.Contains(got, "[===============               ]  50%  50/100 MB") || strings.Contains(got, "60%") || !strings.HasSuffix(got, "\r") {
		t.Fatalf("progress %q", got)
	}
	buf.Reset()
	now = now.Add(time.Second)
	p.update(300<<10, 600<<10) // a small input counts kB
	if got := buf.String(); !strings.Contains(got, "50%  300/600 kB") {
		t.Fatalf("progress %q", got)
	}
}
