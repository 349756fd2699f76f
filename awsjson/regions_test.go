package awsjson

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPartitionsAreTheSDKs fails when the embedded partitions.json is not
// the one of the aws-sdk-go-v2 version go.mod pins: after an SDK upgrade,
// `go generate ./awsjson` copies it again.
func TestPartitionsAreTheSDKs(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-sdk-go-v2").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/aws/aws-sdk-go-v2: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	sdk, err := os.ReadFile(filepath.Join(dir, "internal", "endpoints", "awsrulesfn", "partitions.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sdk, partitionsJSON) {
		t.Fatalf("awsjson/partitions.json differs from %s's: run go generate ./awsjson", dir)
	}
	if _, err := parsePartitions(sdk); err != nil {
		t.Fatal(err)
	}
}

func TestAWSRegions(t *testing.T) {
	r := AWSRegions()
	for _, name := range []string{"us-east-1", "eu-west-1", "ap-southeast-2", "cn-north-1", "us-gov-west-1", "us-iso-east-1", "eusc-de-east-1"} {
		if !r.Serves(name) {
			t.Errorf("%s is not served", name)
		}
	}
	// Made-up names, names that match a partition's regionRegex but no
	// region of it, and the SDK's endpoint pseudo-regions.
	for _, name := range []string{"zz-evade-1", "us-east-7", "mars-north-1", "aws-global", "aws-cn-global", "", "US-EAST-1"} {
		if r.Serves(name) {
			t.Errorf("%q is served", name)
		}
	}
	var none *Regions
	if !none.Serves("us-west-2") || none.Serves("us-east-7") || none.Len() != r.Len() {
		t.Error("the nil Regions is not AWSRegions")
	}
	if r.Partition("cn-northwest-1") != "aws-cn" || r.Partition("us-east-1") != "aws" {
		t.Errorf("partitions: %q %q", r.Partition("cn-northwest-1"), r.Partition("us-east-1"))
	}
	// Every region the SDK lists for a partition, and only those.
	n := 0
	for _, p := range Partitions() {
		n += len(p.Regions)
	}
	if n != r.Len() || !slices.IsSorted(r.Names()) {
		t.Errorf("%d regions in the partitions, %d served", n, r.Len())
	}
}

func TestNewRegions(t *testing.T) {
	r, err := NewRegions([]string{"aws-cn", "us-east-1", "onprem-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Names(), " "); got != "cn-north-1 cn-northwest-1 onprem-east-1 us-east-1" {
		t.Errorf("regions %s", got)
	}
	if r.Serves("us-west-2") || !r.Serves("onprem-east-1") {
		t.Error("serves the wrong regions")
	}
	if r.Partition("onprem-east-1") != "" || r.Partition("us-east-1") != "aws" {
		t.Error("wrong partitions")
	}
	// A private name that AWS's pattern would place still gets its
	// partition: the SDK's placement, not a list.
	if r, _ := NewRegions([]string{"us-east-7"}); r.Partition("us-east-7") != "aws" {
		t.Error("us-east-7 not placed in aws")
	}
	for _, bad := range [][]string{nil, {}, {"us-east-1", "us-east-1"}, {"US-EAST-1"}, {"a/b"}, {strings.Repeat("a", 65)}} {
		if _, err := NewRegions(bad); err == nil {
			t.Errorf("NewRegions(%q) accepted", bad)
		}
	}
}

func TestRegionError(t *testing.T) {
	e := RegionError("zz-evade-1")
	if e.Status != 400 || e.Code != "InvalidSignatureException" || e.Message != "Credential should be scoped to a valid region, not 'zz-evade-1'. " {
		t.Errorf("%+v", e)
	}
}

func FuzzNewRegions(f *testing.F) {
	f.Add("aws,us-east-1")
	f.Add("onprem-1,aws-iso-b")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := NewRegions(strings.Split(s, ","))
		if err != nil {
			return
		}
		for _, name := range r.Names() {
			if !ValidRegion(name) || !r.Serves(name) {
				t.Fatalf("%q served but not a region name", name)
			}
		}
	})
}

// BenchmarkServes: the check every AWS request and take makes.
func BenchmarkServes(b *testing.B) {
	r := AWSRegions()
	for _, region := range []string{"us-east-1", "zz-evade-1"} {
		b.Run(region, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r.Serves(region) == (region == "zz-evade-1") {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
