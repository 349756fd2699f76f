package config

import (
	"strings"
	"testing"
)

func TestServiceQuotasSection(t *testing.T) {
	c, err := Parse("sq.yaml", []byte(`services:
  - preset: ecs
  - preset: servicequotas
service_quotas:
  approval:
    - auto_approve_factor: 2
    - service: ecs
      category: cluster-read
      max_factor: 10
      burst: {auto_approve_up_to: 200, max: 1000}
      rate: {auto_approve_factor: 1.5, max: 100}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Approval{{AutoApproveFactor: 2}, {Service: "ecs", Category: "cluster-read", MaxFactor: 10,
		Burst: ApprovalBounds{AutoApproveUpTo: 200, Max: 1000}, Rate: ApprovalBounds{AutoApproveFactor: 1.5, Max: 100}}}
	if len(c.ServiceQuotas.Approval) != 2 || c.ServiceQuotas.Approval[0] != want[0] || c.ServiceQuotas.Approval[1] != want[1] {
		t.Fatalf("approval = %+v", c.ServiceQuotas.Approval)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"    - {service: nope}\n", `sq.yaml:5:7: service_quotas.approval[0].service: unknown service "nope"`},
		{"    - {service: ecs, category: nope}\n", `service_quotas.approval[0].category: unknown category "nope" of service ecs`},
		{"    - {category: cluster-read}\n", "a category needs its service"},
		{"    - {max_factor: -1}\n", "want a number of at least 0"},
		{"    - {burst: {max: -1}}\n", "service_quotas.approval[0].burst.max: want a number of at least 0"},
		{"    - {rate: {maxx: 1}}\n", "service_quotas.approval[0].rate.maxx"},
		// One value for both quotas was the burst's and the rate's alike.
		{"    - service: ecs\n      auto_approve_up_to: 80\n", "sq.yaml:6:27: service_quotas.approval[0].auto_approve_up_to: a value is the burst's (requests) or the rate's (per second): write it under burst: or rate:"},
		{"    - {service: ecs, max: 1000}\n", "service_quotas.approval[0].max: a value is the burst's"},
		{"    - {maxx: 1}\n", "maxx"},
		{"    - {service: ecs}\n    - {service: ecs}\n", "a second rule for the same service and category"},
	} {
		_, err := Parse("sq.yaml", []byte("services:\n  - preset: ecs\nservice_quotas:\n  approval:\n"+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
