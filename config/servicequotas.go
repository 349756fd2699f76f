package config

import (
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/quota"
)

// ServiceQuotas is the service_quotas section: how the Service Quotas API
// (package servicequotas, served for a `preset: servicequotas` service)
// decides increase requests as they are made. The zero value leaves every
// request PENDING until an operator approves or denies it. A category's
// burst (requests) and rate (requests per second) are two quotas: a value
// is given for one of them, a factor of the default for both.
//
//	service_quotas:
//	  approval:
//	    - auto_approve_factor: 2        # every service: approve up to 2× the default
//	    - service: ecs                  # more specific rules win
//	      category: cluster-read
//	      max_factor: 10                # above 10× the default: NOT_APPROVED
//	      burst: {auto_approve_up_to: 200, max: 1000}
//	      rate: {auto_approve_up_to: 40, max: 100}
type ServiceQuotas struct {
	// Approval are the rules, in file order; the most specific rule
	// matching a quota's service and category decides.
	Approval []Approval
}

// Approval is one rule of the approval policy; the assembly carries it into
// servicequotas.Rule (config does not import servicequotas, which needs
// the Redis client).
type Approval struct {
	Service           string         // "" for every service
	Category          string         // "" for every category of Service
	AutoApproveFactor float64        // approve up to this many times the default, burst and rate each; 0 none
	MaxFactor         float64        // NOT_APPROVED above this many times the default, each; 0 no ceiling
	Burst, Rate       ApprovalBounds // values for the burst (requests) and the rate (per second)
}

// ApprovalBounds are a rule's values for one quota of a category: its
// burst or its rate.
type ApprovalBounds struct {
	AutoApproveFactor float64 // replaces the rule's factor for this quota; 0 keeps it
	AutoApproveUpTo   float64 // approve up to this value; 0 none
	Max               float64 // NOT_APPROVED above this value; 0 no ceiling
}

func (p *parser) serviceQuotas(n *yaml.Node, path string) ServiceQuotas {
	var sq ServiceQuotas
	num := func(dst *float64) func(_, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			x, ok := p.number(v, f)
			if !ok {
				return
			}
			if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				p.errorf(v, f, "want a number of at least 0, got %s", v.Value)
				return
			}
			*dst = x
		}
	}
	bounds := func(dst *ApprovalBounds) func(_, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			p.fields(v, f, map[string]func(_, v *yaml.Node, f string){
				"auto_approve_factor": num(&dst.AutoApproveFactor),
				"auto_approve_up_to":  num(&dst.AutoApproveUpTo),
				"max":                 num(&dst.Max),
			})
		}
	}
	// A value means requests for the burst and requests per second for
	// the rate: one number for both approved a rate 4× its default where
	// the burst's 80 was meant.
	perQuota := func(_, v *yaml.Node, f string) {
		p.errorf(v, f, "a value is the burst's (requests) or the rate's (per second): write it under burst: or rate: (auto_approve_factor and max_factor apply to both)")
	}
	p.fields(n, path, map[string]func(_, v *yaml.Node, f string){
		"approval": func(_, v *yaml.Node, f string) {
			for i, rn := range p.list(v, f) {
				rf := fmt.Sprintf("%s[%d]", f, i)
				var a Approval
				p.fields(rn, rf, map[string]func(_, v *yaml.Node, f string){
					"service": func(_, v *yaml.Node, f string) {
						a.Service, _ = p.name(v, f, namePattern, "service name")
					},
					"category": func(_, v *yaml.Node, f string) {
						a.Category, _ = p.name(v, f, namePattern, "category name")
					},
					"auto_approve_factor": num(&a.AutoApproveFactor),
					"max_factor":          num(&a.MaxFactor),
					"burst":               bounds(&a.Burst),
					"rate":                bounds(&a.Rate),
					"auto_approve_up_to":  perQuota,
					"max":                 perQuota,
				})
				if a.Category != "" && a.Service == "" {
					p.errorf(rn, rf+".category", "a category needs its service")
				}
				for _, prev := range sq.Approval {
					if prev.Service == a.Service && prev.Category == a.Category {
						p.errorf(rn, rf, "a second rule for the same service and category")
					}
				}
				sq.Approval = append(sq.Approval, a)
				p.sqNodes = append(p.sqNodes, rn)
			}
		},
	})
	return sq
}

// checkServiceQuotas reports rules naming a service or category the file
// does not define.
func (p *parser) checkServiceQuotas(sq ServiceQuotas, byName map[string]*quota.Service) {
	for i, a := range sq.Approval {
		if a.Service == "" {
			continue
		}
		f := fmt.Sprintf("service_quotas.approval[%d]", i)
		s, ok := byName[a.Service]
		if !ok {
			p.errorf(p.sqNodes[i], f+".service", "%v %q", quota.ErrUnknownService, a.Service)
			continue
		}
		if _, ok := s.CategoryNamed(a.Category); a.Category != "" && !ok {
			p.errorf(p.sqNodes[i], f+".category", "%v %q of service %s", quota.ErrUnknownCategory, a.Category, a.Service)
		}
	}
}
