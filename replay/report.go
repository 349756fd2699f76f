package replay

// This file is what a replay reports, and its text, JSON and overrides
// forms.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/quota"
)

// Report is what a replay found.
type Report struct {
	// Inputs counts the inputs read; Errors names those that could not
	// be read, or not to their end ("path: reason").
	Inputs int      `json:"inputs"`
	Errors []string `json:"errors,omitempty"`
	// Records counts the records read; Skipped those skipped (no
	// eventTime, not a JSON object …), the first of which SkipSamples
	// shows; Replayed the calls played (known actions, not throttled in
	// the log).
	Records     int64    `json:"records"`
	Skipped     int64    `json:"skipped"`
	SkipSamples []string `json:"skip_samples,omitempty"`
	Replayed    int64    `json:"replayed"`
	// Inexact says what could not be replayed exactly as the sorted log
	// would be; empty when the replay is exact.
	Inexact []string `json:"inexact,omitempty"`
	// Refused counts the calls whose request the service's charging rules
	// refuse (a RunTask of count 11 …), as tollgate serve answers them 400
	// taking nothing: not played; RefusedSamples shows the first.
	Refused        int64    `json:"refused,omitempty"`
	RefusedSamples []string `json:"refused_samples,omitempty"`
	// UnknownServices counts records by the eventSource no service of the
	// config answers; UnknownActions by "service Action" for actions a
	// known service does not have. At most a thousand names each; the
	// rest are counted under "…".
	UnknownServices map[string]int64 `json:"unknown_services,omitempty"`
	UnknownActions  map[string]int64 `json:"unknown_actions,omitempty"`
	// Buckets are the buckets called, most throttled first (then most
	// failed after retries, most calls, and by account, region, service
	// and category): all of them, or those Options.Top and ThrottledOnly
	// select. BucketCount counts them all, ThrottledBuckets those with a
	// throttle.
	Buckets          []Bucket `json:"buckets"`
	BucketCount      int      `json:"bucket_count"`
	ThrottledBuckets int      `json:"throttled_buckets"`
	// Timeline is the calls of the most throttled buckets over time; nil
	// without calls.
	Timeline *Timeline `json:"timeline,omitempty"`
}

// Bucket is what the calls of one bucket met.
type Bucket struct {
	// Service, Account, Region and Category name the bucket (quota.Key).
	Service  string `json:"service"`
	Account  string `json:"account"`
	Region   string `json:"region"`
	Category string `json:"category"`
	// Group is the client group whose retries were played.
	Group string `json:"group"`
	// Burst and Rate are the limit the config gives the bucket.
	Burst int64   `json:"burst"`
	Rate  float64 `json:"rate"`
	// Calls counts the calls played; Throttled those the bucket throttles
	// when each call is one attempt; Failed those still throttled after
	// the group's retries; Attempts and ThrottledAttempts count the
	// attempts with retries.
	Calls             int64 `json:"calls"`
	Throttled         int64 `json:"throttled"`
	Failed            int64 `json:"failed_after_retries"`
	Attempts          int64 `json:"attempts"`
	ThrottledAttempts int64 `json:"throttled_attempts"`
	// Recorded counts the log's own throttling errors for the bucket.
	Recorded int64 `json:"recorded_throttles"`
	// FirstMinute and WorstMinute are the first minute with a throttle
	// (without retries) and the one with the most (WorstCount); zero
	// without throttles. ThrottledMinutes counts minutes with any.
	FirstMinute      time.Time `json:"first_minute,omitzero"`
	WorstMinute      time.Time `json:"worst_minute,omitzero"`
	WorstCount       int64     `json:"worst_minute_throttled"`
	ThrottledMinutes int64     `json:"throttled_minutes"`
	// PeakInstant is the most calls at one instant.
	PeakInstant int64 `json:"peak_instant"`
	// BurstAtRate is the smallest burst that admits every call at the
	// configured rate.
	BurstAtRate int64 `json:"burst_at_rate"`
	// AdmitBurst and AdmitRate are the recommended limit that admits every
	// call: the burst is the configured one or PeakInstant, whichever is
	// larger (no smaller burst admits every call at any rate), and the
	// rate the smallest that admits every call with it, to the nanosecond
	// of the refill interval package bucket keeps (a rate one nanosecond
	// of interval slower throttles), written as the shortest decimal of
	// that interval. AdmitRate is 0 when any rate admits them (the calls
	// never outnumber the burst), AdmitBurst 0 when no rate does (calls
	// nanoseconds apart).
	AdmitBurst int64   `json:"admit_burst"`
	AdmitRate  float64 `json:"admit_rate"`
	// Rate999 is the smallest rate, as exact as AdmitRate, that admits
	// 99.9 % of the calls (a throttled call taking no token) with
	// AdmitBurst; 0 when any rate does (or, with AdmitBurst 0, none).
	// Burst999 is the smallest burst that does at the configured rate; 0
	// for none a limit can hold.
	Rate999  float64 `json:"rate_999"`
	Burst999 int64   `json:"burst_999"`
	// Who says who made the calls and what they called, for the most
	// throttled buckets (whoBuckets); nil for the others.
	Who *Who `json:"who,omitempty"`
}

// shown says how many buckets the table shows when not all.
func (r *Report) shown() string {
	if len(r.Buckets) == r.BucketCount {
		return ""
	}
	return fmt.Sprintf(" (the %d most throttled shown)", len(r.Buckets))
}

func (r *Report) unknownService(s string) { count(r.UnknownServices, s) }
func (r *Report) unknownAction(s string)  { count(r.UnknownActions, s) }

func count(m map[string]int64, s string) {
	if _, ok := m[s]; !ok && len(m) >= maxCounted {
		s = "…"
	}
	m[s]++
}

func (r *run) report() *Report {
	rep := r.rep
	for i := range r.stats.len() {
		r.stats.at(i).finish(r.player.Limit(int32(i)), r.minutes)
	}
	rows := r.rows()
	var ls []*limitSearch
	var whos []*Who
	if r.trace != nil {
		var err error
		if len(rows) > 0 {
			listed := make([]*keyStats, r.stats.len()) // the searches of the buckets not listed are not needed
			for _, i := range rows {
				listed[i] = r.stats.at(i)
			}
			if ls, _, err = searchLimits(r.trace, listed, r.player.Limit); err != nil {
				rep.Errors = append(rep.Errors, "limits not searched: "+err.Error())
			}
		}
		if rep.Timeline, err = timeline(r.trace, &r.stats, r.player.Limit); err != nil {
			rep.Errors = append(rep.Errors, "timeline not drawn: "+err.Error())
		}
		if whos, err = r.who(); err != nil {
			rep.Errors = append(rep.Errors, "callers not counted: "+err.Error())
		}
	}
	rep.BucketCount = r.stats.len()
	for i := range r.stats.len() {
		if r.stats.at(i).throttled > 0 {
			rep.ThrottledBuckets++
		}
	}
	for _, i := range rows {
		st, key, lim := r.stats.at(i), r.stats.key(i), r.player.Limit(int32(i))
		ms := r.minutes.get(st)
		b := Bucket{
			Service: key.Service, Account: key.Account, Region: key.Region, Category: key.Category,
			Group: r.opt.Groups[st.group].Name,
			Burst: lim.Capacity(), Rate: lim.RefillPerSecond(),
			Calls: st.calls, Throttled: st.throttled, Failed: st.failed,
			Attempts: st.attempts, ThrottledAttempts: st.throttledAttempts,
			Recorded: st.recorded, WorstCount: ms.worstCount, ThrottledMinutes: ms.minutes,
			PeakInstant: st.peak, BurstAtRate: st.need,
		}
		if ms.firstMin != 0 {
			b.FirstMinute = time.Unix(0, ms.firstMin).UTC()
			b.WorstMinute = time.Unix(0, ms.worstMin).UTC()
		}
		if ls != nil {
			ls[i].fill(&b)
		}
		if whos != nil {
			b.Who = whos[i]
		}
		rep.Buckets = append(rep.Buckets, b)
	}
	return &rep
}

// rows returns the indices of the buckets the report shows, most
// throttled first (then most failed after retries, most calls, and by
// key): all of them, or only the throttled (Options.ThrottledOnly), at
// most Options.Top.
func (r *run) rows() []int {
	var idx []int // not sized to the buckets: --throttled-only lists few of many
	for i := range r.stats.len() {
		if !r.opt.ThrottledOnly || r.stats.at(i).throttled > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int {
		x, y := r.stats.at(a), r.stats.at(b)
		if c := cmp.Or(cmp.Compare(y.throttled, x.throttled), cmp.Compare(y.failed, x.failed), cmp.Compare(y.calls, x.calls)); c != 0 {
			return c
		}
		kx, ky := r.stats.key(a), r.stats.key(b)
		return cmp.Or(cmp.Compare(kx.Account, ky.Account), cmp.Compare(kx.Region, ky.Region),
			cmp.Compare(kx.Service, ky.Service), cmp.Compare(kx.Category, ky.Category))
	})
	if r.opt.Top > 0 && len(idx) > r.opt.Top {
		idx = idx[:r.opt.Top]
	}
	return idx
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// NeedsOverride reports whether b's calls were throttled and a limit that
// admits them all was found, for an account and region a config can name.
func (b Bucket) NeedsOverride() bool {
	return b.Throttled > 0 && b.AdmitBurst > 0 && quota.ValidAccount(b.Account) && awsjson.ValidRegion(b.Region)
}

// WriteOverrides writes the overrides that admit every call of every
// throttled bucket, in the config's syntax (an overrides: section), or
// nothing when no bucket was throttled.
func (r *Report) WriteOverrides(w io.Writer) error {
	first := true
	for _, b := range r.Buckets {
		if !b.NeedsOverride() {
			continue
		}
		if first {
			if _, err := fmt.Fprintln(w, "overrides:"); err != nil {
				return err
			}
			first = false
		}
		rate := b.AdmitRate
		if rate == 0 { // any rate admits them: keep the configured one
			rate = b.Rate
		}
		_, err := fmt.Fprintf(w, "  - {service: %s, account: %q, region: %s, category: %s, capacity: %d, refill_per_second: %s}\n",
			b.Service, b.Account, b.Region, b.Category, b.AdmitBurst, strconv.FormatFloat(rate, 'f', -1, 64))
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteText writes r as a table, its counts, and the overrides.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%d inputs, %d records: %d calls replayed, %d skipped; %d buckets, %d throttled%s\n",
		r.Inputs, r.Records, r.Replayed, r.Skipped, r.BucketCount, r.ThrottledBuckets, r.shown())
	for _, s := range r.Inexact {
		fmt.Fprintf(w, "NOT EXACT: %s\n", s)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	for _, s := range r.SkipSamples {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	if r.Refused > 0 {
		fmt.Fprintf(w, "%d calls refused as invalid requests (tollgate serve answers them 400, taking nothing), not played\n", r.Refused)
		for _, s := range r.RefusedSamples {
			fmt.Fprintf(w, "refused: %s\n", s)
		}
	}
	writeCounts(w, "calls of services the config does not have", r.UnknownServices)
	writeCounts(w, "calls of actions the config does not know", r.UnknownActions)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "account\tregion\tcategory\tlimit\tcalls\tthrottled\tafter retries\tgroup\tin log\tfirst minute\tworst minute\tburst at rate\tadmits all\t99.9 %: rate | burst at rate\t")
	for _, b := range r.Buckets {
		first, worst := "-", "-"
		if !b.FirstMinute.IsZero() {
			first = b.FirstMinute.Format("2006-01-02 15:04")
			worst = fmt.Sprintf("%s (%d)", b.WorstMinute.Format("15:04"), b.WorstCount)
		}
		admit := b.admits()
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%d/%g\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%d\t%s\t%s | %s\t\n",
			b.Account, b.Region, b.Service, b.Category, b.Burst, b.Rate, b.Calls, b.Throttled, b.Failed, b.Group, b.Recorded,
			first, worst, b.BurstAtRate, admit, b.rate999(), orNone(b.Burst999 > 0, strconv.FormatInt(b.Burst999, 10)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nthrottled: without retries; after retries: calls that still failed with their group's retries; in log: the log's own throttling errors.")
	fmt.Fprintln(w, "burst at rate: the smallest burst admitting every call at the configured rate; admits all: the limit the overrides below set,")
	fmt.Fprintln(w, "the smallest rate (to the nanosecond of interval) with the larger of the burst and the most calls at one instant;")
	fmt.Fprintln(w, "99.9 %: the smallest rate with that burst, and burst at the configured rate, throttling at most 0.1 % of the calls.")
	fmt.Fprintln(w)
	r.writeWho(w)
	return r.WriteOverrides(w)
}

// admits formats the limit admitting every call: "burst/rate", "burst/any"
// when any rate does, "-" when none does.
func (b Bucket) admits() string {
	switch {
	case b.AdmitBurst == 0:
		return "-"
	case b.AdmitRate == 0:
		return fmt.Sprintf("%d/any", b.AdmitBurst)
	}
	return fmt.Sprintf("%d/%s", b.AdmitBurst, strconv.FormatFloat(b.AdmitRate, 'f', -1, 64))
}

// rate999 formats Rate999: the rate, "any", or "none".
func (b Bucket) rate999() string {
	switch {
	case b.Rate999 > 0:
		return strconv.FormatFloat(b.Rate999, 'f', -1, 64)
	case b.AdmitBurst > 0:
		return "any"
	}
	return "none"
}

func orNone(ok bool, s string) string {
	if ok {
		return s
	}
	return "none"
}

func writeCounts(w io.Writer, what string, m map[string]int64) {
	if len(m) == 0 {
		return
	}
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	fmt.Fprintf(w, "%s:", what)
	for i, k := range keys {
		if i == maxSamples {
			fmt.Fprintf(w, " … (%d more)", len(keys)-i)
			break
		}
		fmt.Fprintf(w, " %s %d;", k, m[k])
	}
	fmt.Fprintln(w)
}
