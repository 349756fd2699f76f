package servicequotas

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tollgate/tollgate/quota"
)

// WriteTable prints the Service Quotas codes of cfg's categories, one row
// per quota with what p decides for a request on it (the effective rule),
// as `tollgate check` shows them.
func WriteTable(w io.Writer, cfg *quota.Config, p Policy) error {
	c, err := NewCatalog(cfg)
	if err != nil {
		return err
	}
	if len(c.Services()) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nService Quotas codes (aws service-quotas … --service-code SERVICE --quota-code CODE)")
	fmt.Fprintln(tw, "  SERVICE\tQUOTA CODE\tNAME\tDEFAULT\tUNIT\tINCREASE REQUESTS")
	for _, s := range c.Services() {
		qs, _ := c.Quotas(s.Code)
		for _, q := range qs {
			unit := "requests" // the API's Unit "None": a count
			if svc, ok := cfg.Service(s.Config); ok {
				if cat, ok := svc.CategoryNamed(q.Category); ok && len(cat.Actions) == 0 {
					unit = "tokens" // Fargate's: tasks launched, or calls
				}
			}
			if q.Kind == Rate {
				unit += " per second"
			}
			rule := "operator decides"
			if e, ok := p.Effective(s.Config, &q, q.Default); ok {
				rule = e.String()
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", q.ServiceCode, q.Code, q.Name, formatValue(q.Default), unit, rule)
		}
	}
	fmt.Fprintln(tw, "  Increase requests: what the service_quotas approval rules decide at once (for the default; a factor applies to an account's overridden value); the rest wait for an operator.")
	fmt.Fprintln(tw, "  An approved increase replaces its quota's value, a file override included, for its account and region.")
	return tw.Flush()
}
