package config

import (
	"errors"
	"strings"
	"testing"
)

func TestStoreCache(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want StoreCache
	}{
		{"", StoreCache{}},
		{"    cloud_map_bytes: 64Mi\n    service_quotas_requests: 20000\n", StoreCache{CloudMapBytes: 64 << 20, ServiceQuotasRequests: 20000}},
		{"    cloud_map_bytes: 1Mi\n    service_quotas_requests: 100\n", StoreCache{CloudMapBytes: MinCacheCloudMapBytes, ServiceQuotasRequests: MinCacheServiceQuotasRequests}},
		{"    cloud_map_bytes: 64Gi\n    service_quotas_requests: 10000000\n", StoreCache{CloudMapBytes: MaxCacheCloudMapBytes, ServiceQuotasRequests: MaxCacheServiceQuotasRequests}},
		{"    cloud_map_bytes: 2G\n", StoreCache{CloudMapBytes: 2e9}},
		{"    cloud_map_bytes: 1048576\n", StoreCache{CloudMapBytes: 1 << 20}},
	} {
		src := "services:\n  - preset: ecs\nstore:\n  data_dir: state\n"
		if tc.yaml != "" {
			src += "  cache:\n" + tc.yaml
		}
		c, err := Parse("/etc/tollgate/c.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if c.Store.Cache != tc.want || c.Store.DataDir != "/etc/tollgate/state" {
			t.Errorf("%q: store %+v, want cache %+v", tc.yaml, c.Store, tc.want)
		}
	}
}

// Every bad bound is reported, each with its place in the file, its
// field, the range and what it bounds; nothing of the file is applied.
func TestStoreCacheRefusesBadBounds(t *testing.T) {
	_, err := Parse("c.yaml", []byte("services:\n  - preset: ecs\nstore:\n  cache:\n    cloud_map_bytes: 0\n    service_quotas_requests: 0\n  timeout: soon\n"))
	var errs ConfigErrors
	if !errors.As(err, &errs) || len(errs) != 3 {
		t.Fatalf("three bad fields: %v", err)
	}
	for i, want := range []string{"c.yaml:5:22: store.cache.cloud_map_bytes: ", "c.yaml:6:30: store.cache.service_quotas_requests: ", "c.yaml:7:12: store.timeout: "} {
		if !strings.HasPrefix(errs[i].Error(), want) {
			t.Errorf("error %d: %v, want it to start %q", i, errs[i], want)
		}
	}
	for _, tc := range []struct{ cache, want string }{
		{"cloud_map_bytes: 0", `c.yaml:5:22: store.cache.cloud_map_bytes: "0" is not a size in [1Mi, 64Gi] such as 64Mi: the Cloud Map state held in memory (default 64Mi over the data file, 128Mi over Redis)`},
		{"cloud_map_bytes: -1Mi", `c.yaml:5:22: store.cache.cloud_map_bytes: "-1Mi" is not a size in [1Mi, 64Gi]`},
		{"cloud_map_bytes: 1023Ki", `c.yaml:5:22: store.cache.cloud_map_bytes: "1023Ki" is not a size in [1Mi, 64Gi]`},
		{"cloud_map_bytes: 65Gi", `c.yaml:5:22: store.cache.cloud_map_bytes: "65Gi" is not a size in [1Mi, 64Gi]`},
		{"cloud_map_bytes: 64MiB", `c.yaml:5:22: store.cache.cloud_map_bytes: "64MiB" is not a size in [1Mi, 64Gi] such as 64Mi`},
		{"cloud_map_bytes: [64Mi]", `c.yaml:5:22: store.cache.cloud_map_bytes: want a string, got a list`},
		{"service_quotas_requests: 0", `c.yaml:5:30: store.cache.service_quotas_requests: 0 is not in [100, 10000000]: the Service Quotas requests held in memory over the data file (default 20000)`},
		{"service_quotas_requests: -5", `c.yaml:5:30: store.cache.service_quotas_requests: -5 is not in [100, 10000000]`},
		{"service_quotas_requests: 99", `c.yaml:5:30: store.cache.service_quotas_requests: 99 is not in [100, 10000000]`},
		{"service_quotas_requests: 10000001", `c.yaml:5:30: store.cache.service_quotas_requests: 10000001 is not in [100, 10000000]`},
		{"service_quotas_requests: 20k", `c.yaml:5:30: store.cache.service_quotas_requests: want a whole number`},
		{"cloudmap_bytes: 64Mi", `c.yaml:5:5: store.cache.cloudmap_bytes: unknown field, did you mean "cloud_map_bytes"?`},
	} {
		_, err := Parse("c.yaml", []byte("services:\n  - preset: ecs\nstore:\n  cache:\n    "+tc.cache+"\n"))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.cache, err, tc.want)
		}
	}
}
