package config

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

func TestParseFullConfig(t *testing.T) {
	c, err := Load(context.Background(), "testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Quota.Services()) != 3 {
		t.Fatalf("services = %d", len(c.Quota.Services()))
	}
	cm, _ := c.Quota.Service("cloudmap")
	if cm.Upstream != "http://127.0.0.1:9000" {
		t.Errorf("cloudmap upstream = %q", cm.Upstream)
	}
	orders, ok := c.Quota.ServiceByTargetPrefix("Orders_20240101")
	if !ok || orders.Name != "orders" || orders.Throttle != (quota.Throttle{Code: "TooManyRequestsException", Message: "Slow down", HTTPStatus: 429}) {
		t.Fatalf("orders = %+v", orders)
	}
	w, _ := orders.CategoryOf("PutOrder")
	if w.Limit.RefillPerSecond() != 0.5 {
		t.Errorf("write refill = %v", w.Limit.RefillPerSecond())
	}

	// Overrides: region-specific beats account-wide beats default.
	acct := c.Quota.Account("AKIAI44QH8DHBEXAMPLE")
	if acct != "123456789012" {
		t.Fatalf("access key maps to %q", acct)
	}
	if c.Quota.Account("AKIDUNMAPPED") != "AKIDUNMAPPED" {
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
		_, l, err := c.Quota.Resolve("ecs", tc.account, tc.region, "DescribeClusters")
		if err != nil || l.Capacity() != tc.capacity {
			t.Errorf("%s/%s: limit %v (%v), want capacity %d", tc.account, tc.region, l, err, tc.capacity)
		}
	}
	if _, l, _ := c.Quota.Resolve("ecs", acct, "eu-west-1", "ListTasks"); l.Capacity() != 100 || l.RefillPerSecond() != 20 {
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
			"cfg.yaml:6:5: overrides[0].service: unknown service \"ecs\"",
		}},
		{"an override's bad limit and its category typo, in one run", `services:
  - preset: ecs
overrides:
  - {service: ecs, account: "1", category: cluster-raed, capacity: -5, refill_per_second: 1}
`, []string{
			"cfg.yaml:4:68: overrides[0].capacity: capacity -5 must be at least 1",
			"cfg.yaml:4:5: overrides[0].category: unknown category \"cluster-raed\" of service ecs (did you mean \"cluster-read\"?)",
		}},
		{"an override's index counts the entries that failed before it", `services:
  - preset: ecs
overrides:
  - {service: ecs, account: "1", category: cluster-read, capacity: -5, refill_per_second: 1}
  - {service: ecs, account: "2", category: cluster-read, capacity: 0, refill_per_second: 1}
  - {service: ecss, account: "3", category: cluster-read, capacity: 5, refill_per_second: 1}
`, []string{
			"cfg.yaml:4:68: overrides[0].capacity: capacity -5 must be at least 1",
			"cfg.yaml:5:68: overrides[1].capacity: capacity 0 must be at least 1",
			`cfg.yaml:6:5: overrides[2].service: unknown service "ecss" (did you mean "ecs"?)`,
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
		{"syntax error", "services:\n  - preset: ecs\n   bad: [\n", []string{"cfg.yaml:3:4: did not find expected '-' indicator"}},
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
	_, err := Load(context.Background(), "testdata/does-not-exist.yaml")
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
	f.Add([]byte("services:\n  - name: h\n    route: {host: h.example}\n    autoscale: {command: sh, liveness: {path: /healthz, period: 2s, timeout: 1s, failure_threshold: 2, initial_delay: 0s}}\n"))
	f.Add([]byte("services: [{preset: ecs}]\nregions: [aws-cn, onprem-1]\noverrides: [{service: ecs, account: a, region: onprem-1, category: cluster-read, capacity: 1, refill_per_second: 1}]\n"))
	f.Add([]byte("services: [{preset: cloudmap}]\nstore: {data_dir: state, cache: {cloud_map_bytes: 64Mi, service_quotas_requests: 20000}}\n"))
	f.Add([]byte("services: [{preset: ecs}]\nstore:\n  url: redis://h\n  cache:\n    cloud_map_bytes: 9999999999999Ti\n    service_quotas_requests: -1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v is not ErrInvalidConfig", err)
			}
			return
		}
		// A valid config's cache bounds are none or within range.
		if b := c.Store.Cache.CloudMapBytes; b != 0 && (b < MinCacheCloudMapBytes || b > MaxCacheCloudMapBytes) {
			t.Fatalf("cloud_map_bytes %d out of range", b)
		}
		if n := c.Store.Cache.ServiceQuotasRequests; n != 0 && (n < MinCacheServiceQuotasRequests || n > MaxCacheServiceQuotasRequests) {
			t.Fatalf("service_quotas_requests %d out of range", n)
		}
		// A valid config resolves every action of every service.
		for _, s := range c.Quota.Services() {
			for _, cat := range s.Categories {
				for _, a := range cat.Actions {
					k, l, err := c.Quota.Resolve(s.Name, "acct", "region", a)
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
	if got := c.Store; got != (Store{URL: "redis://127.0.0.1:6379/0", Timeout: 20 * time.Millisecond, OnFailure: "closed"}) {
		t.Fatalf("store = %+v", got)
	}
	if Default().Store != (Store{}) {
		t.Error("the default config has a store")
	}
	c, err = Parse("s.yaml", []byte("services:\n  - preset: ecs\nstore:\n  url: redis://h\n  on_failure: local\n"))
	if err != nil || c.Store.OnFailure != "local" {
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

// TestDidYouMean: an unknown field, preset, service or category named one
// typo away from a known one gets a suggestion; one far from all gets none.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"services:\n  - preset: ecs\n    upstrem: http://x\n", `services[0].upstrem: unknown field, did you mean "upstream"? (known:`},
		{"services:\n  - preset: ecss\n", `services[0].preset: unknown preset "ecss" (did you mean "ecs"?)`},
		{"services:\n  - preset: ecs\noverrides:\n  - {service: ecs, account: \"1\", category: cluster-reed, capacity: 1, refill_per_second: 1}\n",
			`overrides[0].category: unknown category "cluster-reed" of service ecs (did you mean "cluster-read"?)`},
		{"services:\n  - preset: ecs\noverrides:\n  - {service: esc, account: \"1\", category: cluster-read, capacity: 1, refill_per_second: 1}\n",
			`overrides[0].service: unknown service "esc" (did you mean "ecs"?)`},
	} {
		_, err := Parse("c.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
	_, err := Parse("c.yaml", []byte("services:\n  - preset: ecs\noverrides:\n  - {service: ecs, account: \"1\", category: nothing-like-it, capacity: 1, refill_per_second: 1}\n"))
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a name far from every category: %v, want an error without a suggestion", err)
	}
}

// TestStoreTimeoutBelowTheFloor: a store timeout below MinStoreTimeout
// (issue 36: 1us made every decision without Redis, and two nodes admitted
// twice the limit) is refused with its place in the file and the reason.
func TestStoreTimeoutBelowTheFloor(t *testing.T) {
	_, err := Parse("s.yaml", []byte("services:\n  - preset: ecs\nstore:\n  url: redis://h\n  timeout: 1us\n"))
	if err == nil || !strings.Contains(err.Error(), "s.yaml:5:12: store.timeout: 1us is below 1ms, less than a Redis round trip can take") {
		t.Fatalf("timeout 1us: %v", err)
	}
	c, err := Parse("s.yaml", []byte("services:\n  - preset: ecs\nstore:\n  url: redis://h\n  timeout: 1ms\n"))
	if err != nil || c.Store.Timeout != MinStoreTimeout {
		t.Fatalf("timeout 1ms: %+v, %v", c, err)
	}
}
