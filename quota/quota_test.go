package quota

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestECSPresetMatchesSpecTable(t *testing.T) {
	ecs, err := Preset("ecs")
	if err != nil {
		t.Fatal(err)
	}
	if len(ecs.Categories) != 20 {
		t.Fatalf("ecs preset has %d categories, want 20", len(ecs.Categories))
	}
	actions := 0
	for _, c := range ecs.Categories {
		actions += len(c.Actions)
	}
	if actions != 53 {
		t.Errorf("ecs preset has %d actions, want the table's 53", actions)
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
		if strings.Join(c.Actions, " ") != r.actions {
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

func TestParseFullConfig(t *testing.T) {
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Services()) != 3 {
		t.Fatalf("services = %d", len(c.Services()))
	}
	cm, _ := c.Service("cloudmap")
	if cm.Upstream != "http://127.0.0.1:9000" {
		t.Errorf("cloudmap upstream = %q", cm.Upstream)
	}
	orders, ok := c.ServiceByTargetPrefix("Orders_20240101")
	if !ok || orders.Name != "orders" || orders.Throttle != (Throttle{"TooManyRequestsException", "Slow down", 429}) {
		t.Fatalf("orders = %+v", orders)
	}
	w, _ := orders.CategoryOf("PutOrder")
	if w.Limit.RefillPerSecond() != 0.5 {
		t.Errorf("write refill = %v", w.Limit.RefillPerSecond())
	}

	// Overrides: region-specific beats account-wide beats default.
	acct := c.Account("AKIAI44QH8DHBEXAMPLE")
	if acct != "123456789012" {
		t.Fatalf("access key maps to %q", acct)
	}
	if c.Account("AKIDUNMAPPED") != "AKIDUNMAPPED" {
		t.Error("an unmapped access key is its own account")
	}
	for _, tc := range []struct {
		account, region string
		capacity        int64
	}{
		{acct, "eu-west-1", 500},
		{acct, "us-east-1", 100},
		{"999999999999", "eu-west-1", 50},
	} {
		_, l, err := c.Resolve("ecs", tc.account, tc.region, "DescribeClusters")
		if err != nil || l.Capacity() != tc.capacity {
			t.Errorf("%s/%s: limit %v (%v), want capacity %d", tc.account, tc.region, l, err, tc.capacity)
		}
	}
	if _, l, _ := c.Resolve("ecs", acct, "eu-west-1", "ListTasks"); l.Capacity() != 100 || l.RefillPerSecond() != 20 {
		t.Errorf("an override of one category leaks into another: %v", l)
	}
}

func TestParseErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings, one per expected error, in order
	}{
		{"action in two categories", `services:
  - name: svc
    categories:
      - name: a
        capacity: 1
        refill_per_second: 1
        actions: [Get]
      - name: b
        capacity: 1
        refill_per_second: 1
        actions: [Put, Get]
`, []string{"cfg.yaml:8:9: services[0].categories[1].actions: action Get is already in category \"a\""}},
		{"capacity below one", `services:
  - name: svc
    categories:
      - {name: a, capacity: 0, refill_per_second: 1, actions: [Get]}
`, []string{"cfg.yaml:4:29: services[0].categories[0].capacity: capacity 0 must be at least 1"}},
		{"refill not positive", `services:
  - name: svc
    categories:
      - name: a
        capacity: 5
        refill_per_second: 0
        actions: [Get]
`, []string{"cfg.yaml:6:28: services[0].categories[0].refill_per_second: refill_per_second 0 must be greater than 0"}},
		{"unknown preset", "services:\n  - preset: sqs\n", []string{"cfg.yaml:2:13: services[0].preset: unknown preset \"sqs\""}},
		{"unknown field", "services:\n  - preset: ecs\n    burst: 3\n", []string{"cfg.yaml:3:5: services[0].burst: unknown field"}},
		{"unknown top-level field", "services:\n  - preset: ecs\nlimits: {}\n", []string{"cfg.yaml:3:1: limits: unknown field"}},
		{"duplicate service", "services:\n  - preset: ecs\n  - preset: cloudmap\n  - preset: ecs\n", []string{"cfg.yaml:4:5: services[2]: duplicate service \"ecs\""}},
		{"several problems at once", `services:
  - preset: nope
  - name: Bad Name
    categories: []
overrides:
  - {service: ecs, account: "1", category: cluster-read, capacity: -3, refill_per_second: 1}
`, []string{
			"cfg.yaml:2:13: services[0].preset: unknown preset",
			"cfg.yaml:3:11: services[1].name: \"Bad Name\" is not a valid service name",
			"cfg.yaml:6:68: overrides[0].capacity: capacity -3 must be at least 1",
		}},
		{"override of unknown category", `services:
  - preset: ecs
overrides:
  - service: ecs
    account: "1"
    category: cluster-write
    capacity: 3
    refill_per_second: 1
`, []string{"cfg.yaml:4:5: overrides[0].category: unknown category \"cluster-write\""}},
		{"wrong type", "services:\n  - name: svc\n    categories:\n      - {name: a, capacity: lots, refill_per_second: 1, actions: [Get]}\n", []string{"capacity: want a whole number, got \"lots\""}},
		{"syntax error", "services:\n  - preset: ecs\n   bad: [\n", []string{"cfg.yaml:1: did not find expected '-' indicator"}},
		{"empty file", "", []string{"cfg.yaml: the file is empty"}},
		{"not a mapping", "- 1\n", []string{"cfg.yaml:1:1: want a mapping"}},
		{"preset fields cannot change", "services:\n  - preset: ecs\n    categories: []\n", []string{"services[0].categories: cannot be changed on preset \"ecs\""}},
		{"no services", "services: []\n", []string{"cfg.yaml:1:11: services: empty"}},
		{"two documents", "services:\n  - preset: ecs\n---\nservices:\n  - preset: cloudmap\n", []string{"cfg.yaml:3: a second YAML document"}},
		{"rate above 1e9", "services:\n  - name: svc\n    categories:\n      - {name: a, capacity: 5, refill_per_second: 2e9, actions: [Get]}\n", []string{"cfg.yaml:4:51: services[0].categories[0].refill_per_second: bucket: invalid limit: refill rate 2e+09"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("cfg.yaml", []byte(tc.yaml))
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not match ErrInvalidConfig", err)
			}
			var errs ConfigErrors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T is not ConfigErrors", err)
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i].Error(), w)
				}
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.File != "cfg.yaml" {
				t.Errorf("errors.As *FieldError = %+v", fe)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load error = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	seed, _ := os.ReadFile("testdata/full.yaml")
	f.Add(seed)
	f.Add([]byte("services:\n  - preset: ecs\n"))
	f.Add([]byte("services: [{name: a, categories: [{name: b, capacity: 1, refill_per_second: 1, actions: [X]}]}]"))
	f.Add([]byte("overrides: [{service: ecs}]\naccess_keys: {a: b}"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("services: [{preset: ecs}]\nrls: {config_dir: rl, grpc_listen: ':8081', shadow_mode: true, limit_header: X-RateLimit-Limit}\n"))
	f.Add([]byte("services: [{name: k, route: {host: k.example}, autoscale: {kubernetes: {namespace: n, deployment: d, port: 8080}}}]"))
	f.Add([]byte("services:\n  - name: h\n    route: {path_prefix: /h/, strip_prefix: true}\n    autoscale: {command: [sh], env: {A: b}, max_instances: 2, idle_timeout: 5s}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v is not ErrInvalidConfig", err)
			}
			return
		}
		// A valid config resolves every action of every service.
		for _, s := range c.Services() {
			for _, cat := range s.Categories {
				for _, a := range cat.Actions {
					k, l, err := c.Resolve(s.Name, "acct", "region", a)
					if err != nil || k.Category != cat.Name || l.IsZero() {
						t.Fatalf("Resolve(%s, %s) = %v %v %v", s.Name, a, k, l, err)
					}
				}
			}
		}
	})
}

func TestStoreSection(t *testing.T) {
	c, err := Parse("s.yaml", []byte("services:\n  - preset: ecs\nstore:\n  url: redis://127.0.0.1:6379/0\n  timeout: 20ms\n  on_failure: fail-closed\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Store(); got != (Store{URL: "redis://127.0.0.1:6379/0", Timeout: 20 * time.Millisecond, OnFailure: "closed"}) {
		t.Fatalf("store = %+v", got)
	}
	if Default().Store() != (Store{}) {
		t.Error("the default config has a store")
	}
	c, err = Parse("s.yaml", []byte("services:\n  - preset: ecs\nstore:\n  url: redis://h\n  on_failure: local\n"))
	if err != nil || c.Store().OnFailure != "local" {
		t.Fatalf("on_failure local: %+v, %v", c, err)
	}
	_, err = Parse("s.yaml", []byte("services:\n  - preset: ecs\nstore:\n  url: etcd://x\n  timeout: soon\n  on_failure: maybe\n  pool: 3\n"))
	var errs ConfigErrors
	if !errors.As(err, &errs) || len(errs) != 4 {
		t.Fatalf("bad store section: %v", err)
	}
	for i, field := range []string{"store.url", "store.timeout", "store.on_failure", "store.pool"} {
		if errs[i].Field != field {
			t.Errorf("error %d field = %q, want %q", i, errs[i].Field, field)
		}
	}
}
