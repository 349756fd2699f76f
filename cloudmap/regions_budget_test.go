package cloudmap_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/internal/redistest"
)

// callIn is call (limits_test.go) for a request signed for region, with
// no account mapped: the access key is its own account.
func callIn(t *testing.T, url, key, region, op, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+"."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20260101/"+region+"/servicediscovery/aws4_request, SignedHeaders=host, Signature=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc.Type, doc.Message
}

// TestUnknownAccountBudgetSpansRegions repeats the Cloud Map
// attack within AWS's own regions: one access key that access_keys does
// not map creates namespaces of 1 KB in region after region. Its share
// (UnknownAccountBytes) bounds it in all its regions together, not in
// each, so it is refused after about 16 KiB in total; and the next
// unmapped tenant is still served. Memory and Redis alike.
func TestUnknownAccountBudgetSpansRegions(t *testing.T) {
	lim := cloudmap.Limits{UnknownBytes: 1 << 20, UnknownAccountBytes: 16 << 10}
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			opts := cloudmap.Options{Limits: lim}
			if store == "redis" {
				srv := redistest.Start(t)
				client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
				t.Cleanup(func() { client.Close() })
				opts.Redis = client
			}
			r, err := cloudmap.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(r)
			t.Cleanup(srv.Close)
			regions := awsjson.AWSRegions().Names()
			desc := strings.Repeat("d", 1000)
			created, refused, lastCreated := 0, "", -1
			attempts := 3 * len(regions)
			for i := range attempts {
				region := regions[i%len(regions)]
				code, typ, msg := callIn(t, srv.URL, "AKIDROAM", region, "CreateHttpNamespace", fmt.Sprintf(`{"Name":"n%d","Description":%q}`, i, desc))
				switch {
				case code == 200:
					created, lastCreated = created+1, i
				case typ == "ResourceLimitExceeded":
					refused = msg
				default:
					t.Fatalf("namespace %d in %s: %d %s %s", i, region, code, typ, msg)
				}
			}
			// Without the bound across regions, each region would take
			// about 16 of them, up to AWS's 50 namespaces per region.
			if created < 2 || created >= 16 {
				t.Fatalf("one unmapped key made %d namespaces of 1 KB over %d regions; want fewer than 16 in all", created, len(regions))
			}
			if lastCreated >= 2*len(regions) {
				t.Errorf("namespace %d (in its third round of the regions) was still created", lastCreated)
			}
			if !strings.Contains(refused, "in all its regions together") {
				t.Errorf("refusal %q does not say the share spans regions", refused)
			}
			// The next unmapped tenant is served.
			if code, typ, msg := callIn(t, srv.URL, "AKIDNEXT", "us-east-1", "CreateHttpNamespace", `{"Name":"next"}`); code != 200 {
				t.Errorf("the next unmapped tenant: %d %s %s", code, typ, msg)
			}
		})
	}
}
