package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/servicequotas"
)

// The cache tests write cacheScopes Cloud Map scopes (one per account)
// and the Service Quotas requests of cacheAccounts accounts, each mapped
// to the access key AKIDCACHE<i>.
const (
	cacheScopes   = 5
	cacheAccounts = 8
)

// cacheConfig is a config serving Cloud Map and Service Quotas from
// store (the store section's lines after "store:").
func cacheConfig(store string) string {
	var keys strings.Builder
	for a := range cacheAccounts {
		fmt.Fprintf(&keys, "  AKIDCACHE%d: %q\n", a, cacheAccount(a))
	}
	return "services:\n  - preset: ecs\n  - preset: cloudmap\n  - preset: servicequotas\naccess_keys:\n" + keys.String() + "store:\n" + store
}

func cacheAccount(a int) string { return fmt.Sprintf("%012d", 100+a) }

// registerScopes writes cacheScopes scopes of about 350 KiB each, as
// estimated (60 instances of 4,900 characters of attributes), to r, one
// after the other.
func registerScopes(t *testing.T, r *cloudmap.Registry) {
	t.Helper()
	for a := range cacheScopes {
		sc := cloudmap.Scope{Account: cacheAccount(a), Region: "us-east-1"}
		for i := range 60 {
			if err := r.RegisterInstance(t.Context(), sc, "local", "web", fmt.Sprintf("i-%d", i), cacheAttrs(a, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// withinBound fails the test unless u, but for the one scope a store
// may keep past its bound (the one last used), is within bound, and
// holds fewer scopes than were written.
func withinBound(t *testing.T, when string, u cloudmap.CacheUse, bound int64) {
	t.Helper()
	if u.Scopes == 0 || u.Scopes >= cacheScopes || u.Bytes-u.Bytes/int64(u.Scopes) > bound {
		t.Fatalf("cloud_map_bytes %d, %s: %d scopes held of %d written, %d bytes", bound, when, u.Scopes, cacheScopes, u.Bytes)
	}
}

// cacheAttrs are instance i's attributes in account a's scope.
func cacheAttrs(a, i int) map[string]string {
	return map[string]string{"AWS_INSTANCE_PORT": "80", "a": fmt.Sprintf("%d-%d-", a, i) + strings.Repeat("x", 1000),
		"b": strings.Repeat("y", 1000), "c": strings.Repeat("z", 1000), "d": strings.Repeat("w", 1000), "e": strings.Repeat("v", 880)}
}

// readScopes reads every instance back through the node's Cloud Map API,
// signed by each account's key, and fails the test unless each holds
// what registerScopes wrote.
func readScopes(t *testing.T, n *Node) {
	t.Helper()
	ctx := t.Context()
	for a := range cacheScopes {
		c := sd.New(sd.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + n.Addr().String()),
			Credentials: credentials.NewStaticCredentialsProvider(fmt.Sprintf("AKIDCACHE%d", a), "x", "")})
		svcs, err := c.ListServices(ctx, &sd.ListServicesInput{})
		if err != nil || len(svcs.Services) != 1 {
			t.Fatalf("account %d: services %+v, %v", a, svcs, err)
		}
		got := map[string]map[string]string{}
		for p := sd.NewListInstancesPaginator(c, &sd.ListInstancesInput{ServiceId: svcs.Services[0].Id}); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("account %d: instances: %v", a, err)
			}
			for _, in := range page.Instances {
				got[aws.ToString(in.Id)] = in.Attributes
			}
		}
		if len(got) != 60 {
			t.Fatalf("account %d: %d instances, want 60", a, len(got))
		}
		for i := range 60 {
			want := cacheAttrs(a, i)
			if g := got[fmt.Sprintf("i-%d", i)]; g["a"] != want["a"] || g["e"] != want["e"] {
				t.Fatalf("account %d instance %d: attributes %.40v, want %.40v", a, i, g, want)
			}
		}
	}
}

// TestCloudMapCacheBytesInForce: store.cache.cloud_map_bytes at its
// least (1Mi) holds fewer of the 5 scopes of ~350 KiB written than a
// node without it (which holds them all), and no more than 1 MiB beside
// the scope last used, over the data file and over Redis; every
// instance reads back from the file or Redis.
func TestCloudMapCacheBytesInForce(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name, store string
		bound       bool
	}{
		{"data_dir", "  data_dir: state\n  cache: {cloud_map_bytes: 1Mi}\n", true},
		{"data_dir without cache", "  data_dir: state\n", false},
		{"redis", "  url: " + srv.URL() + "\n  cache:\n    cloud_map_bytes: 1Mi\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n := runWithConfig(t, dir, cacheConfig(tc.store))
			registerScopes(t, n.registry)
			if u := n.registry.CacheUse(); !tc.bound && u.Scopes != cacheScopes {
				t.Fatalf("the default bound: %d scopes held of %d written", u.Scopes, cacheScopes)
			} else if tc.bound {
				withinBound(t, "after writing", u, config.MinCacheCloudMapBytes)
			}
			readScopes(t, n)
			if tc.bound {
				withinBound(t, "after reading", n.registry.CacheUse(), config.MinCacheCloudMapBytes)
			}
		})
	}
}

// TestServiceQuotasCacheRequestsInForce: store.cache.service_quotas_requests
// at its least (100) holds at most 100 of the 8 accounts' 128 requests
// in memory, and each reads back from the data file as it was made.
func TestServiceQuotasCacheRequestsInForce(t *testing.T) {
	n := runWithConfig(t, t.TempDir(), cacheConfig("  data_dir: state\n  cache: {service_quotas_requests: 100}\n"))
	ctx := t.Context()
	quotas, _ := n.quotas.Catalog().Quotas("ecs")
	if len(quotas) < 16 {
		t.Fatalf("ecs has %d quotas, the test needs 16", len(quotas))
	}
	made := map[string]float64{} // request id -> desired value
	for a := range cacheAccounts {
		for i, q := range quotas[:16] {
			r, err := n.quotas.RequestIncrease(ctx, cacheAccount(a), "us-east-1", "ecs", q.Code, float64(100_000+a*100+i))
			if err != nil {
				t.Fatal(err)
			}
			made[r.ID] = r.DesiredValue
		}
	}
	if held := n.quotas.CachedRequests(); held > config.MinCacheServiceQuotasRequests {
		t.Fatalf("service_quotas_requests 100: %d requests held of %d made", held, len(made))
	}
	got := map[string]float64{}
	for a := range cacheAccounts {
		c := sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + n.Addr().String()),
			Credentials: credentials.NewStaticCredentialsProvider(fmt.Sprintf("AKIDCACHE%d", a), "x", "")})
		for p := sq.NewListRequestedServiceQuotaChangeHistoryPaginator(c, &sq.ListRequestedServiceQuotaChangeHistoryInput{ServiceCode: aws.String("ecs")}); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("account %d: %v", a, err)
			}
			for _, r := range page.RequestedQuotas {
				if string(r.Status) != servicequotas.StatusPending {
					t.Fatalf("request %s: %s, want it still PENDING", aws.ToString(r.Id), r.Status)
				}
				got[aws.ToString(r.Id)] = aws.ToFloat64(r.DesiredValue)
			}
		}
	}
	if len(got) != len(made) {
		t.Fatalf("read back %d requests, made %d", len(got), len(made))
	}
	for id, v := range made {
		if got[id] != v {
			t.Fatalf("request %s: desired %v, made with %v", id, got[id], v)
		}
	}
	if held := n.quotas.CachedRequests(); held > config.MinCacheServiceQuotasRequests {
		t.Fatalf("service_quotas_requests 100, after reading: %d requests held", held)
	}
}

// TestStoreCacheChangeAtReload: a reload that changes store.cache
// reloads the rest of the file, says in its log line which keys take
// effect only at the next start, and leaves the bounds in force as they
// were at start (1Mi holds fewer scopes than 2Mi would).
func TestStoreCacheChangeAtReload(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "tollgate.yaml", cacheConfig("  data_dir: state\n  cache: {cloud_map_bytes: 1Mi}\n"))
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: path})
	run(t, n, &logs)
	writeFile(t, dir, "tollgate.yaml", cacheConfig("  data_dir: state\n  cache: {cloud_map_bytes: 2Mi, service_quotas_requests: 500}\n"))
	reloaded, err := n.Reload(t.Context())
	if err != nil || !slices.Contains(reloaded, PartConfig) {
		t.Fatalf("reload: %v, %v", reloaded, err)
	}
	want := `msg="the config's store section changed; store settings take effect on restart" changed="store.cache.cloud_map_bytes, store.cache.service_quotas_requests"`
	if !strings.Contains(logs.String(), want) {
		t.Fatalf("logs, want %s:\n%s", want, logs.String())
	}
	registerScopes(t, n.registry)
	withinBound(t, "after a reload to 2Mi", n.registry.CacheUse(), config.MinCacheCloudMapBytes)
}
