package node

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/servicequotas"
)

// TestOneNamePerTenant: the admin API finds an unmapped access key's
// bucket by the key and by the 12-digit account id AWS answers show for
// it, the same bucket with its approved increase, and names both.
func TestOneNamePerTenant(t *testing.T) {
	dir := t.TempDir()
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{
		ConfigPath: writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n  - preset: servicequotas\nservice_quotas:\n  approval:\n    - auto_approve_factor: 3\n"),
		AdminToken: "tok",
	})
	run(t, n, &logs)
	ctx := context.Background()
	endpoint := aws.String("http://" + n.Addr().String())
	creds := credentials.NewStaticCredentialsProvider("AKIDONENAME", "x", "")
	if _, err := ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds, Retryer: aws.NopRetryer{}}).
		DescribeClusters(ctx, &ecs.DescribeClustersInput{}); err != nil {
		t.Fatal(err)
	}
	c := sq.New(sq.Options{Region: "us-east-1", BaseEndpoint: endpoint, Credentials: creds, Retryer: aws.NopRetryer{}})
	if _, err := c.RequestServiceQuotaIncrease(ctx, &sq.RequestServiceQuotaIncreaseInput{ServiceCode: aws.String("ecs"),
		QuotaCode: aws.String(servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)), DesiredValue: aws.Float64(100)}); err != nil {
		t.Fatal(err)
	}
	id := awsjson.AccountID("AKIDONENAME")
	type answer struct {
		Key       string `json:"key"`
		AccountID string `json:"account_id"`
		Bucket    struct {
			Remaining float64 `json:"remaining"`
			Limit     struct {
				Capacity int64 `json:"capacity"`
			} `json:"limit"`
		} `json:"bucket"`
	}
	get := func(account string) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, *endpoint+"/v1/admin/bucket?service=ecs&region=us-east-1&category=cluster-read&account="+account, nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var a answer
		if resp.StatusCode != 200 || json.Unmarshal(b, &a) != nil {
			t.Fatalf("bucket of %s: %d %s", account, resp.StatusCode, b)
		}
		return a
	}
	// The key names the bucket; its tokens refill between the two reads
	// (20 a second), so they are not compared.
	byKey, byID := get("AKIDONENAME"), get(id)
	if byKey.Key != byID.Key || byKey.AccountID != byID.AccountID || byKey.Bucket.Limit != byID.Bucket.Limit {
		t.Errorf("by key %+v, by account id %+v: not the same bucket", byKey, byID)
	}
	if byID.AccountID != id || byID.Bucket.Limit.Capacity != 100 {
		t.Errorf("by account id %s: %+v, want account_id %s and the approved capacity 100", id, byID, id)
	}
}
