package sim

// This file reports the steps of a run's rollouts and traffic changes
// (Result.TrafficLog) in the summary and the HTML report, and where the
// sticky client groups' calls went.

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tollgate/tollgate/autoscale"
)

// writeTrafficLog writes the traffic log of each run that has one.
func writeTrafficLog(w io.Writer, results []*Result) error {
	for _, r := range results {
		if len(r.TrafficLog) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nrevisions and traffic of run %s:\n", r.Scenario.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  at\trevision\tneeded\tready\twhat")
		for _, e := range r.TrafficLog {
			fmt.Fprintf(tw, "  %v\t%s\t%s\t%s\t%s\n", e.At, e.Revision, countCell(e.Needed, e.Needed), countCell(e.Ready, e.Needed), e.Msg)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// countCell is a count of instances for a table, blank for a step that
// needed none.
func countCell(n, needed int) string {
	if needed == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// writeTrafficTable writes the HTML table of the runs' traffic logs, if
// any run has one.
func writeTrafficTable(b *bufio.Writer, results []*Result) {
	has := false
	for _, r := range results {
		has = has || len(r.TrafficLog) > 0
	}
	if !has {
		return
	}
	b.WriteString("\n<h2>Revisions and traffic</h2>\n<table id=\"traffic\">\n" +
		"<thead><tr><th>run</th><th>at</th><th>revision</th><th>needed</th><th>ready</th><th>what</th></tr></thead>\n<tbody>\n")
	td := func(s string) string { return "<td>" + html.EscapeString(s) + "</td>" }
	for _, r := range results {
		for _, e := range r.TrafficLog {
			b.WriteString("<tr>" + td(r.Scenario.Name) + td(e.At.String()) + `<td class="name">` + html.EscapeString(e.Revision) + "</td>" +
				td(countCell(e.Needed, e.Needed)) + td(countCell(e.Ready, e.Needed)) + `<td class="name">` + html.EscapeString(e.Msg) + "</td></tr>\n")
		}
	}
	b.WriteString("</tbody>\n</table>\n<p class=\"dim\">needed: the ready instances the revision's share needs before the split moves; ready: those it had.</p>\n")
}

// extraHeader is the CSV columns of r's revisions and buckets, after
// CSVHeader's.
func extraHeader(r *Result) []string {
	var h []string
	if len(r.Revisions) > 0 {
		h = append(h, "over_max")
	}
	for _, rv := range r.Revisions {
		h = append(h, rv.Name+"_instances", rv.Name+"_percent", rv.Name+"_calls")
	}
	for _, b := range r.Buckets {
		h = append(h, b.Category+"_tokens", b.Category+"_throttled")
	}
	return h
}

// appendExtra appends second k's extraHeader columns to row.
func appendExtra(row []string, r *Result, k int) []string {
	if len(r.Revisions) > 0 {
		row = append(row, strconv.Itoa(r.Seconds[k].OverMax))
	}
	for _, rv := range r.Revisions {
		row = append(row, strconv.Itoa(rv.Starting[k]+rv.Ready[k]+rv.Draining[k]), strconv.Itoa(rv.Percent[k]), strconv.Itoa(rv.Requests[k]))
	}
	for _, b := range r.Buckets {
		row = append(row, strconv.FormatInt(b.Tokens[k], 10), strconv.Itoa(b.Throttled[k]))
	}
	return row
}

// writeSticky lists, when a client group carries a sticky key, the
// revisions each such group's calls reached: one while the split stays,
// the growing one after a rollout moved the key's point.
func writeSticky(w io.Writer, results []*Result) error {
	var rows []string
	for _, r := range results {
		for i, g := range r.Groups {
			if i >= len(r.Scenario.Clients) || r.Scenario.Clients[i].StickyKey == "" {
				continue
			}
			names := slices.Sorted(maps.Keys(g.Revisions))
			parts := make([]string, 0, len(names))
			for _, n := range names {
				parts = append(parts, fmt.Sprintf("%s %d", n, g.Revisions[n]))
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t\n", r.Scenario.Name, g.Name, r.Scenario.Clients[i].StickyKey,
				autoscale.StickyPoint(r.Scenario.Clients[i].StickyKey), strings.Join(parts, ", ")))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tsticky clients\tkey\tpoint\tcalls per revision\t")
	for _, row := range rows {
		fmt.Fprint(tw, row)
	}
	return tw.Flush()
}
