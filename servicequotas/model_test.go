package servicequotas

import (
	"regexp"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

// The derivation is a promise: codes users wrote down must not change.
func TestQuotaCodeIsStable(t *testing.T) {
	if got := QuotaCode("ecs", "cluster-read", Burst); got != "L-15F51B3B" {
		t.Fatalf("ecs cluster-read burst = %s, want L-15F51B3B", got)
	}
	if got := QuotaCode("ecs", "cluster-read", Rate); got != "L-3E62B30D" {
		t.Fatalf("ecs cluster-read rate = %s, want L-3E62B30D", got)
	}
}

func TestCatalogCoversEveryCategory(t *testing.T) {
	var svcs []*quota.Service
	for _, n := range quota.PresetNames() {
		s, _ := quota.Preset(n)
		svcs = append(svcs, s)
	}
	own, _ := quota.NewService("orders_api", []*quota.Category{{Name: "read", Actions: []string{"GetOrder"}, Limit: quota.Default().Services()[0].Categories[0].Limit}})
	svcs = append(svcs, own)
	cfg, err := quota.NewConfig(svcs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCatalog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	shape := regexp.MustCompile(`^L-[0-9A-F]{8}$`)
	for _, s := range cfg.Services() {
		code := s.Name
		if s.Name == "orders_api" {
			code = "orders-api"
		}
		qs, ok := c.Quotas(code)
		if !ok || len(qs) != 2*len(s.Categories) {
			t.Fatalf("%s: %d quotas for %d categories", s.Name, len(qs), len(s.Categories))
		}
		for _, q := range qs {
			if !shape.MatchString(q.Code) || len(q.Description) > 350 || q.Name == "" || q.Default <= 0 {
				t.Errorf("%s: %+v", s.Name, q)
			}
		}
	}
}

func TestPolicyMostSpecificRuleWins(t *testing.T) {
	p := Policy{Rules: []Rule{{AutoApproveFactor: 2}, {Service: "ecs", Burst: Bounds{Max: 500}}, {Service: "ecs", Category: "cluster-read", Burst: Bounds{AutoApproveUpTo: 300}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		svc, cat     string
		def, desired float64
		want         string
	}{
		{"cloudmap", "x", 10, 20, StatusApproved},
		{"cloudmap", "x", 10, 21, StatusPending},
		{"ecs", "service-read", 100, 150, StatusPending}, // the ecs rule has no auto-approval
		{"ecs", "service-read", 100, 501, StatusNotApproved},
		{"ecs", "cluster-read", 50, 300, StatusApproved},
		{"ecs", "cluster-read", 50, 9999, StatusPending}, // its rule has no max
	} {
		if got, _ := p.decide(tc.svc, &Quota{Category: tc.cat, Kind: Burst}, tc.def, tc.desired); got != tc.want {
			t.Errorf("%+v: %s", tc, got)
		}
	}
	if (&Policy{}).rule("ecs", "x") != nil {
		t.Error("empty policy has a rule")
	}
	if err := (Policy{Rules: []Rule{{Category: "x"}}}).Validate(); err == nil {
		t.Error("category without service accepted")
	}
}
