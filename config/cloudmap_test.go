package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAutoscaleCloudMap(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(`services:
  - name: web
    route: {path_prefix: /web/}
    autoscale:
      command: sh
      cloud_map:
        namespace: example.local
        service: web
        account: "111122223333"
        region: eu-west-1
        attributes: {stage: prod}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Autoscale["web"]
	c := a.CloudMap
	if c == nil || c.Namespace != "example.local" || c.Service != "web" || c.Account != "111122223333" || c.Region != "eu-west-1" || c.Attributes["stage"] != "prod" {
		t.Fatalf("cloud_map: %+v", c)
	}
	// The registration is part of what runs: a change makes a new revision.
	before := a.Template()
	c.Attributes["stage"] = "canary"
	if a.Template() == before {
		t.Fatal("Template ignores the cloud_map attributes")
	}
}

func TestParseAutoscaleCloudMapErrors(t *testing.T) {
	dir := t.TempDir()
	head := "services:\n  - name: a\n    route: {path_prefix: /a/}\n    autoscale:\n      command: sh\n      cloud_map: "
	cases := []struct{ yaml, want string }{
		{"{service: web}", "c.yaml:6:18: services[0].autoscale.cloud_map.namespace: missing"},
		{"{namespace: n}", "c.yaml:6:18: services[0].autoscale.cloud_map.service: missing"},
		{"{namespace: n, service: \"we b\"}", "c.yaml:6:42: services[0].autoscale.cloud_map.service: \"we b\" is not a Cloud Map service name"},
		{"{namespace: \"a b\", service: web}", "c.yaml:6:30: services[0].autoscale.cloud_map.namespace: \"a b\" is not 1 to 1024 printable"},
		{"{namespace: n, service: web, attributes: {AWS_INSTANCE_PORT: \"1\"}}", "c.yaml:6:60: services[0].autoscale.cloud_map.attributes.AWS_INSTANCE_PORT: AWS_ attributes are Cloud Map's"},
		{"{namespace: n, service: web, attributes: [x]}", "c.yaml:6:59: services[0].autoscale.cloud_map.attributes: want a mapping"},
		{"{namespace: n, service: web, region: US}", "services[0].autoscale.cloud_map.region: \"US\" is not a region"},
		{"{namespace: n, service: web, dns: x}", "services[0].autoscale.cloud_map.dns: unknown field"},
	}
	for _, c := range cases {
		_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(head+c.yaml+"\n"))
		if err == nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v", c.yaml, err)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml")
		if !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.yaml, got, c.want)
		}
	}
}

// TestCloudMapWithoutItsAPIWarns: a cloud_map section in a config without
// a service answering Cloud Map's API is valid but warned of, at its place.
func TestCloudMapWithoutItsAPIWarns(t *testing.T) {
	const svc = `  - name: web
    route: {path_prefix: /web/}
    autoscale:
      command: sh
      cloud_map: {namespace: local, service: web}
`
	cfg, err := Parse("c.yaml", []byte("services:\n"+svc))
	if err != nil {
		t.Fatal(err)
	}
	ws := cfg.Warnings
	if len(ws) != 1 || ws[0].Line != 6 || ws[0].Column != 18 || ws[0].Field != "services[0].autoscale.cloud_map" || !strings.Contains(ws[0].Msg, "preset: cloudmap") {
		t.Fatalf("warnings %v, want one at c.yaml:6:18 on services[0].autoscale.cloud_map", ws)
	}
	cfg, err = Parse("c.yaml", []byte("services:\n  - preset: cloudmap\n"+svc))
	if err != nil {
		t.Fatal(err)
	}
	if ws := cfg.Warnings; len(ws) != 0 {
		t.Fatalf("warnings with the cloudmap preset: %v", ws)
	}
}

// TestCloudMapPresetForwardedWarns: a cloudmap preset whose requests go to
// an upstream (or to an autoscale pool) is not answered by tollgate's own
// registry, so the instances a cloud_map section registers there are as
// invisible as without the preset: warned of too.
func TestCloudMapPresetForwardedWarns(t *testing.T) {
	const svc = `  - name: web
    route: {path_prefix: /web/}
    autoscale:
      command: sh
      cloud_map: {namespace: local, service: web}
`
	for _, preset := range []string{
		"  - preset: cloudmap\n    upstream: https://servicediscovery.us-east-1.amazonaws.com\n",
		"  - preset: cloudmap\n    route: {path_prefix: /sd/}\n    autoscale: {command: sh}\n",
	} {
		cfg, err := Parse("c.yaml", []byte("services:\n"+preset+svc))
		if err != nil {
			t.Fatal(err)
		}
		if ws := cfg.Warnings; len(ws) != 1 || ws[0].Field != "services[1].autoscale.cloud_map" {
			t.Errorf("warnings %v with\n%s want one on services[1].autoscale.cloud_map", ws, preset)
		}
	}
}
