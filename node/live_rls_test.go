package node

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/internal/logtest"
)

// TestLiveViewShowsRLSDecisions: the Envoy rate limit service's
// decisions reach the live view's panels, the domain in place of the
// service and the rule in place of the category: its decisions per
// second and its hottest buckets (18,530 over-limit answers showed 0
// buckets before).
func TestLiveViewShowsRLSDecisions(t *testing.T) {
	dir := t.TempDir()
	rlsDir := filepath.Join(dir, "ratelimit")
	if err := os.Mkdir(rlsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, rlsDir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n"), AdminToken: "tok", RLS: RLSOptions{ConfigDir: rlsDir}})
	run(t, n, &logs)
	conn, err := grpc.NewClient(n.RLSAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlspb.NewRateLimitServiceClient(conn)
	over := 0
	for range 6 {
		resp, err := client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT {
			over++
		}
	}
	if over != 4 {
		t.Fatalf("%d of 6 over the limit of 2 a minute, want 4", over)
	}
	admin := func(path string, v any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+n.Addr().String()+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(b, v) != nil {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	eventually(t, "the rls bucket in the live view's hot buckets and decisions", func() (bool, string) {
		var hot struct {
			Buckets []struct {
				Service, Account, Category string
				Throttled                  uint64
			} `json:"buckets"`
		}
		admin("/v1/admin/live/hot", &hot)
		var dec struct {
			Series []struct {
				Service, Category  string
				Allowed, Throttled []uint64
			} `json:"series"`
		}
		admin("/v1/admin/live/decisions", &dec)
		var allowed, throttled uint64
		for _, s := range dec.Series {
			if s.Service == "edge" && s.Category == "remote_address" {
				for i := range s.Allowed {
					allowed += s.Allowed[i]
					throttled += s.Throttled[i]
				}
			}
		}
		found := len(hot.Buckets) == 1 && hot.Buckets[0].Service == "edge" && hot.Buckets[0].Category == "remote_address" &&
			strings.Contains(hot.Buckets[0].Account, "remote_address=10.0.0.1") && hot.Buckets[0].Throttled == 4
		return found && allowed == 2 && throttled == 4, "hot " + toJSON(hot) + " decisions " + toJSON(dec)
	})
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
