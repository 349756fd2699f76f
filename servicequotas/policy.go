package servicequotas

import (
	"fmt"
	"math"
	"strings"
)

// Policy decides what happens to an increase request when it is made.
// The most specific rule that matches a quota's service and category
// decides (service and category, then service, then the rule for every
// service); with no rule, every request waits for an operator (PENDING).
type Policy struct {
	Rules []Rule
}

// Rule is the approval policy of one service, one category or all. The
// burst and the rate of a category are two quotas in different units
// (requests, requests per second), so a value is given for one of them
// (Burst, Rate), and a factor of the default for both.
type Rule struct {
	// Service is the service's name in the config; "" matches every
	// service.
	Service string
	// Category is a category of Service; "" matches all of them.
	Category string
	// AutoApproveFactor approves at once a request up to this many times
	// the quota's default (the category's value in the file, override
	// included), for the burst and the rate each; 0 means none.
	AutoApproveFactor float64
	// MaxFactor refuses (NOT_APPROVED) at once a request above this many
	// times the quota's default, for the burst and the rate each; 0
	// means no ceiling.
	MaxFactor float64
	// Burst and Rate bound the burst quota and the rate quota in their
	// own units, beside the factors.
	Burst, Rate Bounds
}

// Bounds are a rule's values for one quota of a category.
type Bounds struct {
	// AutoApproveFactor replaces the rule's factor for this quota when
	// set; 0 keeps the rule's.
	AutoApproveFactor float64
	// AutoApproveUpTo approves at once a request up to this value; 0
	// means none. A request within either this or the factor is
	// approved.
	AutoApproveUpTo float64
	// Max is the most this tollgate grants: a request above it is
	// NOT_APPROVED at once; 0 means no ceiling. With MaxFactor too, the
	// lower ceiling holds.
	Max float64
}

// Effective is what a rule decides for one quota, in the quota's unit.
type Effective struct {
	AutoApproveUpTo float64 // approved at once up to this; 0 none
	Max             float64 // NOT_APPROVED above this; 0 none
}

func badNumber(x float64) bool { return x < 0 || math.IsNaN(x) || math.IsInf(x, 0) }

// Validate reports the first rule that cannot work.
func (p Policy) Validate() error {
	seen := map[[2]string]bool{}
	for i, r := range p.Rules {
		switch {
		case r.Category != "" && r.Service == "":
			return fmt.Errorf("rule %d: category %q without a service", i, r.Category)
		case badNumber(r.AutoApproveFactor) || badNumber(r.Burst.AutoApproveFactor) || badNumber(r.Rate.AutoApproveFactor):
			return fmt.Errorf("rule %d: auto_approve_factor must be a number >= 0", i)
		case badNumber(r.MaxFactor):
			return fmt.Errorf("rule %d: max_factor must be a number >= 0", i)
		case badNumber(r.Burst.AutoApproveUpTo) || badNumber(r.Burst.Max) || badNumber(r.Rate.AutoApproveUpTo) || badNumber(r.Rate.Max):
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

// Effective returns what the policy decides for quota q of the config's
// service (its name in the config) whose default is def, and whether any
// rule governs it.
func (p *Policy) Effective(service string, q *Quota, def float64) (Effective, bool) {
	r := p.rule(service, q.Category)
	if r == nil {
		return Effective{}, false
	}
	b := r.Burst
	if q.Kind == Rate {
		b = r.Rate
	}
	var e Effective
	factor := r.AutoApproveFactor
	if b.AutoApproveFactor > 0 {
		factor = b.AutoApproveFactor
	}
	e.AutoApproveUpTo = max(factor*def, b.AutoApproveUpTo)
	e.Max = b.Max
	if m := r.MaxFactor * def; m > 0 && (e.Max == 0 || m < e.Max) {
		e.Max = m
	}
	return e, true
}

// String says what e decides, as `tollgate check` prints it.
func (e Effective) String() string {
	var parts []string
	if e.AutoApproveUpTo > 0 {
		parts = append(parts, "approve up to "+formatValue(e.AutoApproveUpTo))
	}
	if e.Max > 0 {
		parts = append(parts, "refuse above "+formatValue(e.Max))
	}
	if len(parts) == 0 {
		return "operator decides"
	}
	return strings.Join(parts, ", ")
}

// decide returns the status a new request gets, and why.
func (p *Policy) decide(service string, q *Quota, def, desired float64) (status, reason string) {
	e, ok := p.Effective(service, q, def)
	if !ok {
		return StatusPending, ""
	}
	if e.Max > 0 && desired > e.Max {
		return StatusNotApproved, "above the most this tollgate grants (" + formatValue(e.Max) + ")"
	}
	if e.AutoApproveUpTo > 0 && desired <= e.AutoApproveUpTo {
		return StatusApproved, "approved automatically: within " + formatValue(e.AutoApproveUpTo) + " (the default is " + formatValue(def) + ")"
	}
	return StatusPending, ""
}
