package servicequotas

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

// TestFargateQuotasCanBeIncreased: Fargate's buckets in the ecs preset
// have quota codes of their own, described by what takes from them, and
// an approved increase of the On-Demand tasks burst raises that bucket.
func TestFargateQuotasCanBeIncreased(t *testing.T) {
	c, err := NewCatalog(quota.Default())
	if err != nil {
		t.Fatal(err)
	}
	for cat, code := range map[string]string{
		quota.FargateRunTask:       "L-1B719E19",
		quota.FargateOnDemandTasks: "L-5B940BF3",
		quota.FargateSpotTasks:     "L-76578319",
	} {
		q, ok := c.Quota("ecs", code)
		if !ok || q.Category != cat || q.Kind != Burst {
			t.Fatalf("ecs quota %s: %+v, %v; want %s burst", code, q, ok, cat)
		}
		if !strings.Contains(q.Description, "RunTask on Fargate") || strings.Contains(q.Description, "()") {
			t.Errorf("%s: description %q does not say what takes from it", code, q.Description)
		}
	}
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := s.RequestIncrease(ctx, "111122223333", "us-east-1", "ecs", QuotaCode("ecs", quota.FargateOnDemandTasks, Burst), 200)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, r.ID, StatusApproved, "ok"); err != nil {
		t.Fatal(err)
	}
	k := quota.Key{Service: "ecs", Account: "111122223333", Region: "us-east-1", Category: quota.FargateOnDemandTasks}
	def, _ := quota.Default().Limit(k)
	if got := s.Limit(k, def); got.String() != "200/20" {
		t.Fatalf("fargate-on-demand-tasks limit %v after an approved burst of 200, want 200/20", got)
	}
	k.Category = quota.FargateSpotTasks
	if got := s.Limit(k, def); got != def {
		t.Fatalf("fargate-spot-tasks limit %v, want the default %v", got, def)
	}
}
