package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// WriteSummary writes a table of the results' summaries, one row per run,
// when a run has more than one client group, a second table with a row
// per run and group, and the steps of each run's rollouts and traffic
// changes (Result.TrafficLog).
func WriteSummary(w io.Writer, results []*Result) error {
	if err := writeRuns(w, results); err != nil {
		return err
	}
	for _, r := range results {
		if len(r.Groups) > 1 {
			fmt.Fprintln(w)
			if err := writeGroups(w, results); err != nil {
				return err
			}
			break
		}
	}
	if err := writeSticky(w, results); err != nil {
		return err
	}
	if err := writeTrafficLog(w, results); err != nil {
		return err
	}
	return writeNotModelled(w, results)
}

func writeGroups(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tclients\tcalls\tok %\tfailed\tunfinished\tretries\tthrottled\t429\tok mean\tok p99\t")
	for _, r := range results {
		for _, g := range r.Groups {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n",
				r.Scenario.Name, g.Name, g.Calls, 100*g.SuccessRate, g.Failed, g.Unfinished, g.Retries,
				g.Throttled, g.Rejected, latencyCell(r, g.MeanLatency), latencyCell(r, g.P99Latency))
		}
	}
	return tw.Flush()
}

func writeRuns(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tcalls\tok %\tfailed\tunfinished\tattempts\tretries\tthrottled\t429\tok mean\tok p50\tok p99\tpeak inst\tinst·s\t")
	for _, r := range results {
		s := r.Summary
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Scenario.Name, s.Calls, 100*s.SuccessRate, s.Failed, s.Unfinished, s.Attempts, s.Retries,
			s.Throttled, s.Rejected, latencyCell(r, s.MeanLatency), latencyCell(r, s.P50Latency), latencyCell(r, s.P99Latency),
			instancesCell(r, s.PeakInstances), instancesCell(r, s.InstanceSeconds))
	}
	return tw.Flush()
}

// notModelled is what a table shows for a figure the run does not have.
const notModelled = "-"

// latencyCell is a latency for a table; notModelled when the run's calls
// cannot take time (no backend, no retries).
func latencyCell(r *Result, d time.Duration) string {
	if !r.Scenario.timesCalls() {
		return notModelled
	}
	return roundDuration(d).String()
}

// instancesCell is an instance count for a table; notModelled without a
// backend.
func instancesCell(r *Result, n int) string {
	if !r.Scenario.hasInstances() {
		return notModelled
	}
	return strconv.Itoa(n)
}

// writeNotModelled says why a table shows notModelled, once.
func writeNotModelled(w io.Writer, results []*Result) error {
	if msg := notModelledNote(results); msg != "" {
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	return nil
}

// notModelledNote explains the notModelled cells of results' tables, or
// is empty when there is none.
func notModelledNote(results []*Result) string {
	instances, latency := false, false
	for _, r := range results {
		instances = instances || !r.Scenario.hasInstances()
		latency = latency || !r.Scenario.timesCalls()
	}
	switch {
	case latency:
		return notModelled + ": not in the run: without a backend an admitted call succeeds at once and no instance runs, and without retries no call waits, so every latency is 0"
	case instances:
		return notModelled + ": not in the run: without a backend an admitted call succeeds at once and no instance runs"
	}
	return ""
}

// roundDuration rounds d to three significant figures or so, for tables.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// CSVHeader is the header row WriteCSV writes.
var CSVHeader = []string{
	"second", "attempts", "first_attempts", "retries", "admitted", "throttled", "rejected_429",
	"completed", "failed", "starting", "ready", "draining", "in_flight", "pending", "recommended",
	"p50_ms", "p99_ms",
}

// WriteCSV writes r's time series as CSV, one row per second under
// CSVHeader; latencies are in milliseconds. A run of several revisions
// adds, after those, the instances over max and each revision's
// instances, percent and calls (hello-00002_instances, ...); a run whose
// calls take from several buckets, each bucket's tokens and throttled
// calls (fargate-run-task_tokens, ...).
func WriteCSV(w io.Writer, r *Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(append(slices.Clip(CSVHeader), extraHeader(r)...)); err != nil {
		return err
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	for _, s := range r.Seconds {
		row := []string{strconv.FormatInt(int64(s.Start/time.Second), 10)}
		for _, v := range []int{s.Attempts, s.FirstAttempts, s.Retries, s.Admitted, s.Throttled, s.Rejected,
			s.Completed, s.Failed, s.Starting, s.Ready, s.Draining, s.InFlight, s.Pending, s.Recommended} {
			row = append(row, strconv.Itoa(v))
		}
		row = append(row, ms(s.P50), ms(s.P99))
		row = appendExtra(row, r, int(s.Start/time.Second))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
