package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSimPresetPrintsSummaryAndWritesFiles(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCmd("sim", "--preset", "thundering-herd", "--out", dir, "--format", "svg")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"thundering-herd:", "no-jitter", "additive-jitter", "full-jitter", "throttled", "wrote 7 files to " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"thundering-herd-no-jitter.csv", "thundering-herd-full-jitter.svg", "thundering-herd-comparison.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSimScenarioFileWithSeed(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCmd("sim", "--scenario", "testdata/sim-small.yaml", "--out", dir, "--seed", "42")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// One run: no comparison plot; the study name is made safe for files.
	if !strings.Contains(out, "small herd: 120 calls at once") || !strings.Contains(out, "wrote 2 files") {
		t.Fatalf("output:\n%s", out)
	}
	f, err := os.Open(filepath.Join(dir, "small_herd.csv"))
	if err != nil {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			t.Log(e.Name())
		}
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 11 || rows[1][2] != "120" {
		t.Fatalf("csv %v, %v", rows, err)
	}
	// Every call of the herd is admitted once, within the 10 s.
	admitted := 0
	for _, row := range rows[1:] {
		n, err := strconv.Atoi(row[4])
		if err != nil {
			t.Fatal(err)
		}
		admitted += n
	}
	if admitted != 120 {
		t.Fatalf("admitted %d calls, want 120", admitted)
	}
	// The same seed again gives the same table.
	code2, out2, _ := runCmd("sim", "--scenario", "testdata/sim-small.yaml", "--out", t.TempDir(), "--seed", "42")
	if code2 != 0 || tableOf(out2) != tableOf(out) {
		t.Fatalf("second run differs:\n%s\n%s", out, out2)
	}
}

// tableOf returns the summary table of a sim output, without the line
// naming the output directory.
func tableOf(out string) string {
	i := strings.Index(out, "\nwrote ")
	if i < 0 {
		return out
	}
	return out[:i]
}

func TestSimBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sim"}, 2, "usage: tollgate sim"},
		{[]string{"sim", "--preset", "ecs-burst", "--scenario", "x.yaml"}, 2, "usage: tollgate sim"},
		{[]string{"sim", "--preset", "nope"}, 2, `tollgate sim: invalid scenario: unknown preset "nope"`},
		{[]string{"sim", "--preset", "ecs-burst", "--format", "gif"}, 2, `unknown --format "gif"`},
		{[]string{"sim", "--seed", "-1", "--preset", "ecs-burst"}, 2, "invalid value"},
		{[]string{"sim", "--preset", "ecs-burst", "extra"}, 2, "usage: tollgate sim"},
		{[]string{"sim", "--scenario", "testdata/sim-bad.yaml"}, 1, "testdata/sim-bad.yaml:4:5: clients[0].burts: unknown field, did you mean \"burst\"? (known: action, burst, burst_at, capacity_provider, count, launch_type, name, process, rate, steps, sticky_key, tag)"},
		{[]string{"sim", "--scenario", "testdata/missing.yaml"}, 1, "tollgate sim: "},
		{[]string{"sim", "--scenario", "testdata/missing.yaml"}, 1, "no such file"},
	} {
		code, out, errs := runCmd(tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
}

func TestUsageListsSim(t *testing.T) {
	_, out, _ := runCmd("help")
	if !strings.Contains(out, "sim ") {
		t.Fatalf("usage lacks sim:\n%s", out)
	}
}

func TestSimFileNamesNeverCollide(t *testing.T) {
	t.Parallel() // its own servers, files and markers
	dir := t.TempDir()
	if code, _, errs := runCmd("sim", "--scenario", "testdata/sim-collide.yaml", "--out", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{"names-a_b.csv", "names-a_b-2.csv", "names-comparison-3.csv", "names-comparison.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 7 {
		t.Errorf("%d files, want 7", len(entries))
	}
}

func TestSimHTMLReport(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCmd("sim", "--preset", "thundering-herd", "--out", dir, "--format", "html")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "wrote 4 files to "+dir) {
		t.Errorf("output: %s", out)
	}
	page, err := os.ReadFile(filepath.Join(dir, "thundering-herd.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg"); n != 4 || !strings.Contains(string(page), `<table id="summary">`) {
		t.Errorf("report has %d figures (want 4) or lacks its summary", n)
	}
	for _, f := range []string{"thundering-herd-no-jitter.csv", "thundering-herd-full-jitter.csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestSimHeadingWithoutDescription checks the line above the summary of a
// scenario file with a name and no description: the name alone, no colon.
func TestSimHeadingWithoutDescription(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(file, []byte("name: quiet\nduration: 3s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd("sim", "--scenario", file, "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if first, _, _ := strings.Cut(out, "\n"); first != "quiet" {
		t.Errorf("first line %q, want %q:\n%s", first, "quiet", out)
	}
}
