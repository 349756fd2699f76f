package quota

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestECSPresetMatchesSpecTable(t *testing.T) {
	ecs, err := Preset("ecs")
	if err != nil {
		t.Fatal(err)
	}
	// The SPEC table's 20, the inferred ones, Fargate's 3 (AWS Fargate
	// throttling quotas) and the unlisted operations' bucket, which no
	// action names.
	want := len(ecsCategories) + len(ecsInferred) + 3 + 1
	if len(ecs.Categories) != want || len(ecsCategories) != 20 {
		t.Fatalf("ecs preset has %d categories (%d documented), want 20 + %d inferred + 3 of Fargate + unlisted", len(ecs.Categories), len(ecsCategories), len(ecsInferred))
	}
	for _, c := range ecs.Categories[len(ecsCategories)+len(ecsInferred):] {
		if len(c.Actions) != 0 || c.DrawnBy == "" {
			t.Errorf("category %s: actions %v, DrawnBy %q; want none and a description", c.Name, c.Actions, c.DrawnBy)
		}
	}
	for _, c := range ecs.Categories[len(ecsCategories) : len(ecsCategories)+len(ecsInferred)] {
		if !strings.HasPrefix(c.Source, "inferred: ") {
			t.Errorf("category %s is not in AWS's table but its Source %q does not say it is inferred", c.Name, c.Source)
		}
	}
	if ecs.Throttle != (Throttle{"ThrottlingException", "Rate exceeded", 400}) {
		t.Errorf("ecs throttle = %+v", ecs.Throttle)
	}
	if ecs.TargetPrefix != "AmazonEC2ContainerServiceV20141113" {
		t.Errorf("ecs target prefix = %q", ecs.TargetPrefix)
	}

	// Cross-check against the table in SPEC.md, row by row, when the
	// shared folder is beside the checkout (as it is in CI).
	rows := specECSRows(t)
	if len(rows) != 20 {
		t.Fatalf("found %d ECS rows in SPEC.md, want 20", len(rows))
	}
	for _, r := range rows {
		name := strings.ReplaceAll(r.name, " ", "-")
		c, ok := ecs.CategoryNamed(name)
		if !ok {
			t.Errorf("SPEC category %q missing from the preset", r.name)
			continue
		}
		if c.Limit.Capacity() != r.capacity || c.Limit.RefillPerSecond() != r.refill {
			t.Errorf("%s: preset %v, SPEC %d/%v", name, c.Limit, r.capacity, r.refill)
		}
		// SPEC keeps the seed's spelling UpdateContainerInstancesStates,
		// which the preset keeps as an alias of the SDK's.
		var spec []string
		for _, a := range strings.Fields(r.actions) {
			spec = append(spec, ecs.Canonical(a))
		}
		if strings.Join(c.Actions, " ") != strings.Join(spec, " ") {
			t.Errorf("%s: preset actions %v, SPEC %q", name, c.Actions, r.actions)
		}
		for _, a := range c.Actions {
			if got, _ := ecs.CategoryOf(a); got != c {
				t.Errorf("CategoryOf(%s) = %v, want %s", a, got, name)
			}
		}
	}
}

type specRow struct {
	name, actions string
	capacity      int64
	refill        float64
}

func specECSRows(t *testing.T) []specRow {
	t.Helper()
	path := filepath.Join("..", "..", "shared", "SPEC.md")
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("SPEC.md not beside the checkout (%v); the preset counts above still ran", err)
	}
	defer f.Close()
	var rows []specRow
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| category | actions |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("SPEC row %q has %d cells", line, len(cells))
		}
		c, err1 := strconv.ParseInt(strings.TrimSpace(cells[2]), 10, 64)
		r, err2 := strconv.ParseFloat(strings.TrimSpace(cells[3]), 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("SPEC row %q: %v %v", line, err1, err2)
		}
		rows = append(rows, specRow{strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1]), c, r})
	}
	return rows
}

func TestCloudMapPreset(t *testing.T) {
	cm, err := Preset("cloudmap")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := cm.CategoryOf("DiscoverInstances")
	if !ok || c.Limit.Capacity() != 20000 || c.Limit.RefillPerSecond() != 1000 {
		t.Fatalf("DiscoverInstances = %+v, want 20000/1000", c)
	}
	if cm.Throttle.Code != "RequestLimitExceeded" || cm.Throttle.HTTPStatus != 400 || cm.Throttle.Message != "Rate exceeded" {
		t.Errorf("cloudmap throttle = %+v", cm.Throttle)
	}
	if cm.TargetPrefix != "Route53AutoNaming_v20170314" {
		t.Errorf("cloudmap target prefix = %q", cm.TargetPrefix)
	}
	for _, tc := range []struct {
		action, category string
		capacity         int64
		refill           float64
	}{
		{"DiscoverInstancesRevision", "discover-instances-revision", 3000, 3000},
		{"RegisterInstance", "control-plane", 100, 20},
		{"CreateHttpNamespace", "control-plane", 100, 20},
		{"GetOperation", "control-plane", 100, 20},
	} {
		c, ok := cm.CategoryOf(tc.action)
		if !ok || c.Name != tc.category || c.Limit.Capacity() != tc.capacity || c.Limit.RefillPerSecond() != tc.refill {
			t.Errorf("%s = %+v, want %s %d/%v", tc.action, c, tc.category, tc.capacity, tc.refill)
		}
	}
}

func TestUnknownPreset(t *testing.T) {
	if _, err := Preset("sqs"); !errors.Is(err, ErrUnknownPreset) {
		t.Fatalf("Preset(sqs) error = %v", err)
	}
	// A typo gets the did-you-mean a config file's preset gets.
	_, err := Preset("ecss")
	if want := `unknown preset "ecss" (did you mean "ecs"?) (have cloudmap, ec2, ecs, kms, secretsmanager, servicequotas, ssm, sts)`; err == nil || err.Error() != want {
		t.Errorf("Preset(ecss) error = %v, want %s", err, want)
	}
}

func TestPresetOfTargetPrefix(t *testing.T) {
	for prefix, want := range map[string]string{"Route53AutoNaming_v20170314": "cloudmap", "AmazonEC2ContainerServiceV20141113": "ecs", ServiceQuotasTargetPrefix: "servicequotas", "AmazonSSM": "ssm", "TrentService": "kms", "secretsmanager": "secretsmanager", "AmazonSQS": "", "": ""} {
		if got, ok := PresetOfTargetPrefix(prefix); got != want || ok != (want != "") {
			t.Errorf("PresetOfTargetPrefix(%s) = %q %v, want %q", prefix, got, ok, want)
		}
	}
}

func TestResolveSharesBucketAcrossActions(t *testing.T) {
	c := Default()
	k1, l1, err := c.Resolve("ecs", "111122223333", "us-east-1", "DescribeClusters")
	if err != nil {
		t.Fatal(err)
	}
	k2, _, _ := c.Resolve("ecs", "111122223333", "us-east-1", "ListClusters")
	if k1 != k2 || k1.Category != "cluster-read" {
		t.Fatalf("DescribeClusters → %v, ListClusters → %v; want one cluster-read key", k1, k2)
	}
	if l1.Capacity() != 50 || l1.RefillPerSecond() != 20 {
		t.Errorf("limit = %v", l1)
	}
	k3, _, _ := c.Resolve("ecs", "111122223333", "eu-west-1", "ListClusters")
	k4, _, _ := c.Resolve("ecs", "444455556666", "us-east-1", "ListClusters")
	if k3 == k1 || k4 == k1 || k3.String() == k1.String() || k4.String() == k1.String() {
		t.Error("another region or account must have its own bucket")
	}
	if got := k1.String(); got != "{ecs/111122223333}:us-east-1:cluster-read" {
		t.Errorf("key string = %q", got)
	}
	if _, _, err := c.Resolve("ecs", "a", "r", "DescribeNothing"); !errors.Is(err, ErrUnknownAction) {
		t.Errorf("unknown action error = %v", err)
	}
	if _, _, err := c.Resolve("sqs", "a", "r", "SendMessage"); !errors.Is(err, ErrUnknownService) {
		t.Errorf("unknown service error = %v", err)
	}
}
