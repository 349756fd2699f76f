package servicequotas

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

// TestRequestIncreaseAndDecide: the Go calls go through the same policy,
// state and limits as the API: PENDING, then approved, then the limit.
func TestRequestIncreaseAndDecide(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	code := QuotaCode("ecs", "cluster-read", Rate)
	r, err := s.RequestIncrease(ctx, "111122223333", "us-east-1", "ecs", code, 60)
	if err != nil || r.Status != StatusPending {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := s.RequestIncrease(ctx, "111122223333", "us-east-1", "ecs", code, 70); err == nil {
		t.Fatal("a second open request on the same quota was accepted")
	}
	if _, err := s.RequestIncrease(ctx, "111122223333", "us-east-1", "ecs", "L-00000000", 70); err == nil {
		t.Fatal("an unknown quota was accepted")
	}
	if _, err := s.Decide(ctx, r.ID, StatusPending, ""); err == nil {
		t.Fatal("Decide accepted PENDING as a decision")
	}
	k := quota.Key{Service: "ecs", Account: "111122223333", Region: "us-east-1", Category: "cluster-read"}
	_, def, err := quota.Default().Resolve("ecs", k.Account, k.Region, "DescribeClusters")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Limit(k, def); got != def {
		t.Fatalf("limit %v before the approval", got)
	}
	d, err := s.Decide(ctx, r.ID, StatusApproved, "ok")
	if err != nil || d.Status != StatusApproved || d.Reason != "ok" {
		t.Fatalf("%+v %v", d, err)
	}
	if got := s.Limit(k, def); got.String() != "50/60" {
		t.Fatalf("limit %v after the approval, want 50/60", got)
	}
	if _, err := s.Decide(ctx, r.ID, StatusDenied, "late"); !errors.Is(err, errNotPending) {
		t.Fatalf("deciding twice: %v", err)
	}
}
