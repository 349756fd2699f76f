package servicequotas

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tollgate/tollgate/quota"
)

// WriteTable prints the Service Quotas codes of cfg's categories, one row
// per quota, as `tollgate check` shows them.
func WriteTable(w io.Writer, cfg *quota.Config) error {
	c, err := NewCatalog(cfg)
	if err != nil {
		return err
	}
	if len(c.Services()) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nService Quotas codes (aws service-quotas … --service-code SERVICE --quota-code CODE)")
	fmt.Fprintln(tw, "  SERVICE\tQUOTA CODE\tNAME\tDEFAULT\tUNIT")
	for _, s := range c.Services() {
		qs, _ := c.Quotas(s.Code)
		for _, q := range qs {
			unit := "requests" // the API's Unit "None": a count
			if q.Kind == Rate {
				unit = "requests per second"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", q.ServiceCode, q.Code, q.Name, formatValue(q.Default), unit)
		}
	}
	fmt.Fprintln(tw, "  An approved increase replaces its quota's value, a file override included, for its account and region.")
	return tw.Flush()
}
