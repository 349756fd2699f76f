package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSticky(t *testing.T) {
	dir := t.TempDir()
	head := "services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      command: sh\n      traffic:\n        - {revision: a-00001, percent: 90}\n        - {latest_revision: true, percent: 10}\n"
	for _, c := range []struct {
		sticky string
		want   Sticky
		table  string
	}{
		{"      sticky: {header: x-user-id}\n", Sticky{Header: "X-User-Id"}, "sticky per client by header X-User-Id"},
		{"      sticky: {cookie: session}\n", Sticky{Cookie: "session"}, "sticky per client by cookie session"},
		{"      sticky:\n        client_address: true\n", Sticky{ClientAddress: true}, "sticky per client by client address"},
	} {
		cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(head+c.sticky))
		if err != nil {
			t.Fatalf("%q: %v", c.sticky, err)
		}
		if got := cfg.Autoscale["a"].Sticky; got == nil || *got != c.want {
			t.Errorf("%q: sticky %+v, want %+v", c.sticky, got, c.want)
		}
		var table strings.Builder
		if err := cfg.WriteTable(&table); err != nil || !strings.Contains(table.String(), "10 % to the latest ready revision; "+c.table+"\n") {
			t.Errorf("%q: table lacks %q: %v\n%s", c.sticky, c.table, err, table.String())
		}
	}
	cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(head))
	if err != nil || cfg.Autoscale["a"].Sticky != nil {
		t.Fatalf("no sticky block: %v %+v", err, cfg.Autoscale["a"].Sticky)
	}
}

func TestParseStickyErrors(t *testing.T) {
	dir := t.TempDir()
	head := "services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      command: sh\n"
	cases := []struct{ sticky, want string }{
		{"      sticky: {header: X-User-Id, cookie: session}\n",
			"c.yaml:6:15: services[0].autoscale.sticky: give exactly one client key: header: NAME, cookie: NAME or client_address: true (2 given)"},
		{"      sticky: {}\n",
			"c.yaml:6:15: services[0].autoscale.sticky: give exactly one client key"},
		{"      sticky: {header: \"X User\"}\n",
			"c.yaml:6:24: services[0].autoscale.sticky.header: \"X User\" is not a header name"},
		{"      sticky: {cookie: \"a;b\"}\n",
			"c.yaml:6:24: services[0].autoscale.sticky.cookie: \"a;b\" is not a cookie name"},
		{"      sticky: {header: [a]}\n",
			"c.yaml:6:24: services[0].autoscale.sticky.header: want a string"},
		{"      sticky: {client_address: false}\n",
			"c.yaml:6:32: services[0].autoscale.sticky.client_address: false keys on nothing"},
		{"      sticky: {client_address: maybe}\n",
			"c.yaml:6:32: services[0].autoscale.sticky.client_address: want true or false"},
		{"      sticky: {query: user}\n",
			"c.yaml:6:16: services[0].autoscale.sticky.query"},
		{"      sticky: X-User-Id\n",
			"c.yaml:6:15: services[0].autoscale.sticky: want {header: NAME}, {cookie: NAME} or {client_address: true}"},
	}
	for _, c := range cases {
		_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(head+c.sticky))
		if err == nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v", c.sticky, err)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml")
		if !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.sticky, got, c.want)
		}
	}
	kube := "services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      kubernetes: {namespace: n, deployment: d}\n      sticky: {header: X-User-Id}\n"
	// The pool splits above its runners: a split over Deployments is
	// sticky the same way.
	c, err := Parse(filepath.Join(dir, "c.yaml"), []byte(kube))
	if err != nil || c.Autoscale["a"].Sticky == nil || c.Autoscale["a"].Sticky.Header != "X-User-Id" {
		t.Errorf("sticky with kubernetes: %v", err)
	}
}
