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
      auto_approve_up_to: 200
      max: 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Approval{{AutoApproveFactor: 2}, {Service: "ecs", Category: "cluster-read", AutoApproveUpTo: 200, Max: 1000}}
	if len(c.ServiceQuotas.Approval) != 2 || c.ServiceQuotas.Approval[0] != want[0] || c.ServiceQuotas.Approval[1] != want[1] {
		t.Fatalf("approval = %+v", c.ServiceQuotas.Approval)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"    - {service: nope}\n", `sq.yaml:5:7: service_quotas.approval[0].service: unknown service "nope"`},
		{"    - {service: ecs, category: nope}\n", `service_quotas.approval[0].category: unknown category "nope" of service ecs`},
		{"    - {category: cluster-read}\n", "a category needs its service"},
		{"    - {max: -1}\n", "want a number of at least 0"},
		{"    - {maxx: 1}\n", "maxx"},
		{"    - {service: ecs}\n    - {service: ecs}\n", "a second rule for the same service and category"},
	} {
		_, err := Parse("sq.yaml", []byte("services:\n  - preset: ecs\nservice_quotas:\n  approval:\n"+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
