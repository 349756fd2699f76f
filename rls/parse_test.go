package rls

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
)

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string // each a line of the error, in order
	}{
		{"empty domain", "descriptors: []\n", []string{"a.yaml:1:1: domain: config file cannot have an empty domain"}},
		{"empty key", "domain: d\ndescriptors:\n  - value: v\n", []string{"a.yaml:3:5: descriptors[0].key: descriptor has an empty key"}},
		{"duplicate composite key", `domain: d
descriptors:
  - key: k
    value: v
  - key: k
    value: v
`, []string{`a.yaml:5:10: descriptors[1].key: duplicate descriptor composite key "d.k_v" (first at line 3)`}},
		{"unit with unlimited", `domain: d
descriptors:
  - key: k
    rate_limit: {unlimited: true, unit: second}
`, []string{"a.yaml:4:41: descriptors[0].rate_limit.unit: should not specify a rate limit unit when unlimited"}},
		{"unknown unit", `domain: d
descriptors:
  - key: k
    rate_limit: {unit: fortnight, requests_per_unit: 1}
`, []string{`a.yaml:4:24: descriptors[0].rate_limit.unit: invalid rate limit unit "fortnight": want second, minute, hour, day, week, month or year`}},
		{"missing unit", `domain: d
descriptors:
  - key: k
    rate_limit: {requests_per_unit: 1}
`, []string{"a.yaml:4:17: descriptors[0].rate_limit.unit: missing: want second, minute, hour, day, week, month or year (or unlimited: true)"}},
		{"empty replaces", `domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ""}]}
`, []string{"a.yaml:4:65: descriptors[0].rate_limit.replaces[0].name: should not have an empty replaces entry"}},
		{"self replaces", `domain: d
descriptors:
  - key: k
    rate_limit: {name: me, unit: second, requests_per_unit: 1, replaces: [{name: me}]}
`, []string{`a.yaml:4:75: descriptors[0].rate_limit.replaces[0].name: replaces should not contain the name of the same descriptor ("me")`}},
		{"share_threshold without wildcard", `domain: d
descriptors:
  - key: k
    value: v
    share_threshold: true
`, []string{`a.yaml:5:5: descriptors[0].share_threshold: share_threshold can only be used with wildcard values (containing '*'), but found key "k_v"`}},
		// envoy ratelimit checks keys against one flat list, so a domain
		// inside a descriptor passes there and is dropped; here it is an
		// error of its level.
		{"field of another level", `domain: d
descriptors:
  - key: k
    domain: other
`, []string{"a.yaml:4:5: descriptors[0].domain: unknown field (known here: descriptors, detailed_metric, key, metadata, quota_mode, rate_limit, shadow_mode, share_threshold, value, value_to_metric)"}},
		{"every problem reported", `domain: d
descriptors:
  - key: a
    rate_limit: {unit: minutes, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: second, requests_per_unit: -1}
  - key: c
    shadow_mode: maybe
    descriptors:
      - value: x
`, []string{
			`a.yaml:4:24: descriptors[0].rate_limit.unit: invalid rate limit unit "minutes"`,
			`a.yaml:6:51: descriptors[1].rate_limit.requests_per_unit: want a whole number from 0 to 4294967295, got "-1"`,
			`a.yaml:8:18: descriptors[2].shadow_mode: want true or false, got "maybe"`,
			`a.yaml:10:9: descriptors[2].descriptors[0].key: descriptor has an empty key`,
		}},
		{"quoted numbers and booleans", `domain: d
descriptors:
  - key: k
    shadow_mode: "yes"
    rate_limit: {unit: second, requests_per_unit: "10"}
`, []string{
			`a.yaml:4:18: descriptors[0].shadow_mode: want true or false, got the quoted string "yes" (envoy ratelimit refuses it too)`,
			`a.yaml:5:51: descriptors[0].rate_limit.requests_per_unit: want a whole number, got the quoted string "10" (envoy ratelimit refuses it too)`,
		}},
		{"syntax", "domain: d\ndescriptors: [\n", []string{"a.yaml:2:1: did not find expected node content"}},
		{"not a mapping", "- domain: d\n", []string{"a.yaml:1:1: want a mapping, got a list"}},
		{"empty file", "", []string{"a.yaml: the file is empty; it needs a domain"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]File{{Name: "a.yaml", Data: []byte(c.yaml)}}, LoadOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%v does not match ErrInvalidConfig", err)
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%v holds no FieldError", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(c.want), err)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d:\n got %s\nwant %s", i, lines[i], w)
				}
			}
		})
	}
}

func TestParseCompatibility(t *testing.T) {
	// What envoy ratelimit's YAML library reads: numbers as values, YAML
	// 1.1 booleans, upper-case units, nulls, anchors.
	cfg := mustParse(t, `
domain: c
descriptors:
  - key: code
    value: 200
    shadow_mode: yes
    rate_limit: {unit: SECOND, requests_per_unit: 5}
  - key: week
    rate_limit: &w {unit: week, requests_per_unit: 7}
  - key: week2
    rate_limit: *w
  - key: nothing
    value:
    rate_limit:
    descriptors:
    metadata: {any: [thing]}
`)
	m := cfg.Lookup("c", desc("code=200").Entries)
	if m.Rule == nil || !m.Rule.ShadowMode || m.Rule.Key != "code_200" {
		t.Errorf("code=200: %+v", m.Rule)
	}
	m = cfg.Lookup("c", desc("week2=x").Entries)
	if m.Rule == nil || m.Rule.Limit().Interval() != 24*time.Hour {
		t.Errorf("week2: %+v", m.Rule)
	}
	if m := cfg.Lookup("c", desc("nothing=x").Entries); m.Rule != nil {
		t.Errorf("nothing matched %v", m.Rule)
	}
}

func TestParseDomains(t *testing.T) {
	a := "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]\n"
	b := "domain: d\ndescriptors: [{key: b, rate_limit: {unit: second, requests_per_unit: 2}}]\n"
	files := []File{{Name: "a.yaml", Data: []byte(a)}, {Name: "b.yaml", Data: []byte(b)}}
	_, err := Parse(files, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), `b.yaml:1:9: domain: duplicate domain "d": also in a.yaml:1`) {
		t.Errorf("a domain in two files: %v", err)
	}
	cfg, err := Parse(files, LoadOptions{MergeDomains: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Lookup("d", desc("b=1").Entries); m.Rule == nil || m.Rule.RequestsPerUnit != 2 {
		t.Errorf("merged domain: %v", m.Rule)
	}
	files[1].Data = []byte(a)
	if _, err := Parse(files, LoadOptions{MergeDomains: true}); err == nil || !strings.Contains(err.Error(), `duplicate descriptor composite key "d.a" (first at another file)`) {
		t.Errorf("merged duplicate: %v", err)
	}
}

func TestMaxWindow(t *testing.T) {
	year := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 100}\n  - key: m\n    rate_limit: {unit: month, requests_per_unit: 100}\n"
	_, err := Parse([]File{{Name: "a.yaml", Data: []byte(year)}}, LoadOptions{MaxWindow: time.Duration(1) << 52})
	want := "a.yaml:4:24: descriptors[0].rate_limit.unit: 100 per year refills over 365 days, longer than the 52.1 days the store holds; use the memory store or a shorter unit"
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("a year on a store of 2^52 ns:\n got %v\nwant %s…", err, want)
	}
	if _, err := Parse([]File{{Name: "a.yaml", Data: []byte(year)}}, LoadOptions{}); err != nil {
		t.Errorf("a year on the memory store: %v", err)
	}
}

func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A Kubernetes ConfigMap volume: the files are links into a dot
	// directory, which must not be read a second time.
	write("..2026_01_01/one.yaml", "domain: one\n")
	if err := os.Symlink("..2026_01_01/one.yaml", filepath.Join(dir, "one.yaml")); err != nil {
		t.Fatal(err)
	}
	write("sub/two.yml", "domain: two\n")
	write(".hidden.yaml", "domain: one\n")
	// Every file counts, whatever its name, as in envoy ratelimit: one
	// named "rules" is loaded, a README is an error.
	write("rules", "domain: three\n")
	write("README.md", "not yaml")
	if _, err := Load(dir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "README.md") {
		t.Errorf("a README beside the rules: %v", err)
	}
	os.Remove(filepath.Join(dir, "README.md"))
	cfg, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Domains(), ","); got != "one,three,two" {
		t.Errorf("domains %q", got)
	}
	if len(cfg.Files()) != 3 {
		t.Errorf("files %v", cfg.Files())
	}
	// One file may be named.
	if cfg, err := Load(filepath.Join(dir, "sub/two.yml"), LoadOptions{}); err != nil || len(cfg.Files()) != 1 {
		t.Errorf("one file: %v %v", cfg, err)
	}
	if _, err := Load(filepath.Join(dir, "missing"), LoadOptions{}); !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(example2))
	f.Add([]byte("domain: d\ndescriptors: [{key: k, value: 'a*b*', share_threshold: true, rate_limit: {unit: second, requests_per_unit: 3, name: n, replaces: [{name: m}]}}]"))
	f.Add([]byte("domain: &a d\ndescriptors: [&b {key: k, descriptors: [*b]}]"))
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("domain: d\ndescriptors: &l [{key: k, descriptors: *l}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse([]File{{Name: "f.yaml", Data: data}}, LoadOptions{MaxWindow: time.Duration(1) << 52})
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not match ErrInvalidConfig", err)
			}
			return
		}
		for _, r := range cfg.Rules() {
			if r.Unlimited != r.Limit().IsZero() && r.RequestsPerUnit != 0 {
				t.Fatalf("rule %v: limit %v", r, r.Limit())
			}
			cfg.Lookup(r.Domain, desc(strings.Split(r.Key, ".")...).Entries)
		}
	})
}

// Load reads regular files only: a named pipe held open by a writer that
// never writes, or a link to a character device, is an error naming the
// file, returned at once instead of a read that never ends.
func TestLoadRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "b.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() { _, err := Load(dir, LoadOptions{}); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "b.yaml: not a regular file (a named pipe)") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Load hung on a FIFO")
	}
	os.Remove(fifo)
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "zero: not a regular file (a character device)") {
		t.Errorf("/dev/zero: %v", err)
	}
	// A context that has ended stops the load.
	os.Remove(filepath.Join(dir, "zero"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LoadContext(ctx, dir, LoadOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
}

// A file of two YAML documents loads the first, as envoy ratelimit's YAML
// library does, with a warning naming the second.
func TestSecondDocumentWarns(t *testing.T) {
	cfg, err := Parse([]File{{Name: "a.yaml", Data: []byte("domain: one\n---\ndomain: two\n")}}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Domains(), ","); got != "one" {
		t.Errorf("domains %q", got)
	}
	if w := cfg.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], "a.yaml:2: a second YAML document") {
		t.Errorf("warnings %q", w)
	}
}
