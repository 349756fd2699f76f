package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cloudmap"
)

func TestParseRegions(t *testing.T) {
	c, err := Parse("c.yaml", []byte("services:\n  - preset: ecs\nregions: [aws-cn, onprem-east-1, us-east-1]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Quota.Regions()
	if got := strings.Join(r.Names(), " "); got != "cn-north-1 cn-northwest-1 onprem-east-1 us-east-1" {
		t.Errorf("regions %s", got)
	}
	if c.Quota.ServesRegion("us-west-2") || !c.Quota.ServesRegion("onprem-east-1") {
		t.Error("serves the wrong regions")
	}
	var table strings.Builder
	if err := c.WriteTable(&table); err != nil || !strings.Contains(table.String(), "regions served: 4 (aws 1, aws-cn 2, private onprem-east-1)\n") {
		t.Errorf("table (%v):\n%s", err, table.String())
	}
	// Without the list: every region of AWS's partitions, and no other.
	c, err = Parse("c.yaml", []byte("services:\n  - preset: ecs\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Quota.ServesRegion("eu-west-1") || !c.Quota.ServesRegion("us-gov-east-1") || c.Quota.ServesRegion("zz-evade-1") || c.Quota.ServesRegion("us-east-7") {
		t.Error("the default is not AWS's regions")
	}
	if !Default().Quota.ServesRegion("us-east-1") || Default().Quota.ServesRegion("mars-north-1") {
		t.Error("the built-in config is not AWS's regions")
	}
}

func TestParseRegionsErrors(t *testing.T) {
	dir := t.TempDir()
	const svc = "services:\n  - preset: ecs\n"
	const cm = "  - name: a\n    route: {path_prefix: /a/}\n    autoscale:\n      command: sh\n      cloud_map: {namespace: n, service: web, region: "
	cases := []struct{ yaml, want string }{
		{svc + "regions: []\n", "c.yaml:3:10: regions: empty: name the regions or partitions"},
		{svc + "regions: us-east-1\n", "c.yaml:3:10: regions: want a list"},
		{svc + "regions: [us-east-1, US-WEST-2]\n", `c.yaml:3:22: regions[1]: "US-WEST-2" is neither a partition`},
		{svc + "regions: [aws, aws]\n", `c.yaml:3:16: regions[1]: "aws" is given twice`},
		{svc + "regions: [{a: b}]\n", "c.yaml:3:11: regions[0]: want a string"},
		{svc + "overrides:\n  - {service: ecs, account: a, region: us-east-7, category: cluster-read, capacity: 1, refill_per_second: 1}\n",
			`c.yaml:4:40: overrides[0].region: "us-east-7" is not a region of AWS's partitions, so no request for it is served (did you mean "us-east-1"?); name it in regions: to serve it`},
		{svc + "regions: [eu-west-1]\noverrides:\n  - {service: ecs, account: a, region: eu-west-2, category: cluster-read, capacity: 1, refill_per_second: 1}\n",
			`c.yaml:5:40: overrides[0].region: "eu-west-2" is not in the regions list, so no request for it is served (did you mean "eu-west-1"?)`},
		{svc + cm + "mars-north-1}\n", `c.yaml:7:55: services[1].autoscale.cloud_map.region: "mars-north-1" is not a region of AWS's partitions`},
		{svc + cm + "us-east-1}\nregions: [onprem-1]\n", `c.yaml:7:55: services[1].autoscale.cloud_map.region: "us-east-1" is not in the regions list`},
		{svc + strings.TrimSuffix(cm, ", region: ") + "}\nregions: [eu-west-1]\n", `c.yaml:7:18: services[1].autoscale.cloud_map.region: missing, and the registry's default region us-east-1 is not in the regions list`},
	}
	for _, c := range cases {
		_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(c.yaml))
		if err == nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v", c.yaml, err)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml")
		if !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.yaml, got, c.want)
		}
	}
	if defaultCloudMapRegion != cloudmap.DefaultScope.Region {
		t.Errorf("config takes %s for the registry's default region, the registry %s", defaultCloudMapRegion, cloudmap.DefaultScope.Region)
	}
	// A private region named in the list may be used everywhere.
	if _, err := Parse(filepath.Join(dir, "c.yaml"), []byte(svc+cm+"onprem-1}\nregions: [aws, onprem-1]\n")); err != nil {
		t.Error(err)
	}
}
