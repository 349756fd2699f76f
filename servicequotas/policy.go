package servicequotas

import (
	"fmt"
	"math"
)

// Policy decides what happens to an increase request when it is made.
// The most specific rule that matches a quota's service and category
// decides (service and category, then service, then the rule for every
// service); with no rule, every request waits for an operator (PENDING).
type Policy struct {
	Rules []Rule
}

// Rule is the approval policy of one service, one category or all.
type Rule struct {
	// Service is the service's name in the config; "" matches every
	// service.
	Service string
	// Category is a category of Service; "" matches all of them.
	Category string
	// AutoApproveFactor approves at once a request up to this many times
	// the quota's default (the category's value in the file, override
	// included); 0 means none.
	AutoApproveFactor float64
	// AutoApproveUpTo approves at once a request up to this value; 0
	// means none. A request within either bound is approved.
	AutoApproveUpTo float64
	// Max is the most this tollgate grants: a request above it is
	// NOT_APPROVED at once; 0 means no ceiling.
	Max float64
}

// Validate reports the first rule that cannot work.
func (p Policy) Validate() error {
	seen := map[[2]string]bool{}
	for i, r := range p.Rules {
		switch {
		case r.Category != "" && r.Service == "":
			return fmt.Errorf("rule %d: category %q without a service", i, r.Category)
		case r.AutoApproveFactor < 0 || math.IsNaN(r.AutoApproveFactor) || math.IsInf(r.AutoApproveFactor, 0):
			return fmt.Errorf("rule %d: auto_approve_factor must be a number >= 0", i)
		case r.AutoApproveUpTo < 0 || r.Max < 0 || math.IsNaN(r.AutoApproveUpTo+r.Max) || math.IsInf(r.AutoApproveUpTo+r.Max, 0):
			return fmt.Errorf("rule %d: auto_approve_up_to and max must be numbers >= 0", i)
		}
		k := [2]string{r.Service, r.Category}
		if seen[k] {
			return fmt.Errorf("rule %d: a second rule for service %q category %q", i, r.Service, r.Category)
		}
		seen[k] = true
	}
	return nil
}

// rule returns the rule that governs a category, or nil.
func (p *Policy) rule(service, category string) *Rule {
	var best *Rule
	score := -1
	for i := range p.Rules {
		r := &p.Rules[i]
		s := 0
		switch {
		case r.Service == "" && r.Category == "":
		case r.Service == service && r.Category == "":
			s = 1
		case r.Service == service && r.Category == category:
			s = 2
		default:
			continue
		}
		if s > score {
			best, score = r, s
		}
	}
	return best
}

// decide returns the status a new request gets, and why.
func (p *Policy) decide(service, category string, def, desired float64) (status, reason string) {
	r := p.rule(service, category)
	if r == nil {
		return StatusPending, ""
	}
	if r.Max > 0 && desired > r.Max {
		return StatusNotApproved, "above the most this tollgate grants (" + formatValue(r.Max) + ")"
	}
	if r.AutoApproveFactor > 0 && desired <= r.AutoApproveFactor*def {
		return StatusApproved, "approved automatically: within " + formatValue(r.AutoApproveFactor) + "× the default " + formatValue(def)
	}
	if r.AutoApproveUpTo > 0 && desired <= r.AutoApproveUpTo {
		return StatusApproved, "approved automatically: within " + formatValue(r.AutoApproveUpTo)
	}
	return StatusPending, ""
}
