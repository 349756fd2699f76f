package replay

// This file writes a ScaleReport.

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/sim"
)

// WriteJSON writes the report as indented JSON.
func (r *ScaleReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("replay: write report: %w", err)
	}
	return nil
}

// scaleRows are the rows of a service's table: a name and its value.
var scaleRows = []struct {
	name string
	val  func(sim.ScalerStats) string
}{
	{"requests", func(s sim.ScalerStats) string { return strconv.FormatInt(s.Requests, 10) }},
	{"instances peak", func(s sim.ScalerStats) string { return strconv.Itoa(s.PeakInstances) }},
	{"instances mean", func(s sim.ScalerStats) string { return strconv.FormatFloat(s.MeanInstances, 'f', 2, 64) }},
	{"instance-seconds", func(s sim.ScalerStats) string { return strconv.FormatInt(s.InstanceSeconds, 10) }},
	{"cold starts", func(s sim.ScalerStats) string { return strconv.FormatInt(s.ColdStarts, 10) }},
	{"pending requests", func(s sim.ScalerStats) string { return strconv.FormatInt(s.Pending, 10) }},
	{"pending wait p50", func(s sim.ScalerStats) string { return s.WaitP50.String() }},
	{"pending wait p99", func(s sim.ScalerStats) string { return s.WaitP99.String() }},
	{"429s at max instances", func(s sim.ScalerStats) string { return strconv.FormatInt(s.Rejected, 10) }},
	{"over request_timeout", func(s sim.ScalerStats) string { return strconv.FormatInt(s.OverTimeout, 10) }},
	{"span", func(s sim.ScalerStats) string { return (time.Duration(s.Seconds) * time.Second).String() }},
}

// WriteText writes the report as text: its counts, then a table per
// service, a column per value of the sweep.
func (r *ScaleReport) WriteText(w io.Writer) error {
	formats := make([]string, 0, len(r.Formats))
	for _, f := range AccessFormats {
		if n := r.Formats[string(f)]; n > 0 {
			formats = append(formats, fmt.Sprintf("%d %s", n, f))
		}
	}
	fmt.Fprintf(w, "%d inputs (%s), %d requests: %d skipped lines, %d unrouted, %d beyond %v\n",
		r.Inputs, strings.Join(formats, ", "), r.Requests, r.Skipped, r.Unrouted, r.OutOfSpan, sim.MaxRecordedSpan)
	for _, s := range r.Inexact {
		fmt.Fprintf(w, "NOT EXACT: %s\n", s)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	for _, s := range r.SkipSamples {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	for _, s := range r.UnroutedSamples {
		fmt.Fprintf(w, "unrouted: %s\n", s)
	}
	if !r.Start.IsZero() {
		fmt.Fprintf(w, "from %s\n", r.Start.Format(time.RFC3339))
	}
	for _, svc := range r.Services {
		fmt.Fprintf(w, "\nservice %s\n", svc.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "\trecorded"
		if len(r.Values) > 0 {
			head = ""
			for _, v := range r.Values {
				head += fmt.Sprintf("\t%s=%d", r.Setting, v)
			}
		}
		fmt.Fprintln(tw, head+"\t")
		for _, row := range scaleRows {
			line := row.name
			for _, c := range svc.Columns {
				line += "\t" + row.val(c)
			}
			fmt.Fprintln(tw, line+"\t")
		}
		line := "peak by minute"
		for _, p := range svc.PeakByMinute {
			line += "\t" + minutes(p)
		}
		fmt.Fprintln(tw, line+"\t")
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\ninstances: starting, ready or draining at the end of each second; pending: requests that waited for an instance.")
	return nil
}

// maxTextMinutes bounds the minutes the text report lists; --json has them all.
const maxTextMinutes = 20

// minutes lists the peaks of a short run, and refers a long one to JSON.
func minutes(p []int) string {
	if len(p) > maxTextMinutes {
		return fmt.Sprintf("(%d minutes: --json)", len(p))
	}
	s := make([]string, len(p))
	for i, n := range p {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}
