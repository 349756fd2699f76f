package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTraffic(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(`services:
  - name: hello
    route: {host: hello.example}
    autoscale:
      command: sh
      traffic:
        - {revision: hello-00001, percent: 90, tag: stable}
        - {latest_revision: true, percent: 10}
        - {revision: hello-00003, tag: canary}
`))
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Autoscale["hello"].Traffic
	if len(tr) != 3 || tr[0].Revision != "hello-00001" || tr[0].Percent != 90 || tr[0].Tag != "stable" ||
		!tr[1].LatestRevision || tr[1].Percent != 10 || tr[2].Revision != "hello-00003" || tr[2].Percent != 0 || tr[2].Tag != "canary" {
		t.Fatalf("traffic: %+v", tr)
	}
	if at := tr[0].At; at.Line != 7 || at.Column != 22 || at.Field != "services[0].autoscale.traffic[0].revision" {
		t.Fatalf("traffic[0] at %+v, want 7:22 services[0].autoscale.traffic[0].revision", at)
	}
	if at := tr[1].At; at.Line != 8 || at.Column != 11 || at.Field != "services[0].autoscale.traffic[1]" {
		t.Fatalf("traffic[1] at %+v, want 8:11 services[0].autoscale.traffic[1]", at)
	}
	var table strings.Builder
	if err := cfg.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if want := "traffic: 90 % to hello-00001 (tag stable), 10 % to the latest ready revision, 0 % to hello-00003 (tag canary); per request\n"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
	// Without a block: nil, all to the latest ready revision.
	cfg, err = Parse(filepath.Join(dir, "c.yaml"), []byte("services:\n  - name: a\n    route: {host: a.example}\n    autoscale: {command: sh}\n"))
	if err != nil || cfg.Autoscale["a"].Traffic != nil {
		t.Fatalf("no traffic block: %v %+v", err, cfg)
	}
	table.Reset()
	if err := cfg.WriteTable(&table); err != nil || !strings.Contains(table.String(), "traffic: 100 % to the latest ready revision; per request\n") {
		t.Errorf("table without a traffic block: %v\n%s", err, table.String())
	}
}

func TestParseTrafficErrors(t *testing.T) {
	dir := t.TempDir()
	head := "services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      command: sh\n      traffic:\n"
	cases := []struct{ traffic, want string }{
		{"        - {latest_revision: true, percent: 90}\n",
			"c.yaml:7:9: services[0].autoscale.traffic: percents sum to 90, not 100"},
		{"        - {latest_revision: true, percent: 90}\n        - {revision: a-00001, percent: 20}\n",
			"c.yaml:7:9: services[0].autoscale.traffic: percents sum to 110, not 100"},
		{"        - {revision: a-00001, percent: 50, tag: x}\n        - {latest_revision: true, percent: 50, tag: x}\n",
			"c.yaml:8:53: services[0].autoscale.traffic[1].tag: \"x\" is already the tag of services[0].autoscale.traffic[0]"},
		{"        - {latest_revision: true, percent: 100, tag: Canary}\n",
			"c.yaml:7:54: services[0].autoscale.traffic[0].tag: \"Canary\" is not a tag"},
		{"        - {latest_revision: true, percent: 100, tag: a--b}\n",
			"services[0].autoscale.traffic[0].tag: \"a--b\" is not a tag"},
		{"        - {revision: b-00001, percent: 100}\n",
			"c.yaml:7:22: services[0].autoscale.traffic[0].revision: \"b-00001\" is not a revision of service a"},
		{"        - {revision: a-00001, latest_revision: true, percent: 100}\n",
			"c.yaml:7:11: services[0].autoscale.traffic[0]: give either revision: NAME or latest_revision: true"},
		{"        - {percent: 100}\n",
			"c.yaml:7:11: services[0].autoscale.traffic[0]: give either revision"},
		{"        - {latest_revision: true, percent: 100}\n        - {revision: a-00001}\n",
			"c.yaml:8:11: services[0].autoscale.traffic[1]: percent 0 without a tag reaches nothing"},
		{"        - {latest_revision: true, percent: 101}\n",
			"c.yaml:7:44: services[0].autoscale.traffic[0].percent: 101 not in [0, 100]"},
		{"        - {latest_revision: yes please, percent: 100}\n",
			"services[0].autoscale.traffic[0].latest_revision: want true or false"},
		{"        - {latest_revision: true, percent: 100, weight: 3}\n",
			"services[0].autoscale.traffic[0].weight"},
		{"        []\n", "services[0].autoscale.traffic: empty"},
	}
	for _, c := range cases {
		_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(head+c.traffic))
		if err == nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v", c.traffic, err)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml")
		if !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.traffic, got, c.want)
		}
	}
	var many strings.Builder
	many.WriteString("        - {latest_revision: true, percent: 100}\n")
	for i := range MaxTrafficRevisions {
		many.WriteString("        - {revision: a-0000" + string(rune('0'+i)) + ", tag: t" + string(rune('a'+i)) + "}\n")
	}
	if _, err := Parse(filepath.Join(dir, "c.yaml"), []byte(head+many.String())); err == nil || !strings.Contains(err.Error(), "at most 10") {
		t.Errorf("11 revisions: %v", err)
	}
}
