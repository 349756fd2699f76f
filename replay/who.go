package replay

// This file says who made a throttled bucket's calls and what they
// called: its top principals, user agents, source addresses and actions,
// by calls and by throttles, from Space-Saving summaries kept while the
// trace is played again for the most throttled buckets.

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tollgate/tollgate/internal/spacesaving"
)

// Who made a bucket's calls.
const (
	dimPrincipal = iota // userIdentity.arn
	dimUserAgent        // userAgent
	dimSource           // sourceIPAddress
	dimAction           // eventName
	dims
)

// maxCallerNames bounds the distinct names kept of each dimension (16
// bits of a call's caller); past it, names are counted as otherCaller.
const maxCallerNames = 1<<16 - 1

// otherCaller names the callers past maxCallerNames.
const otherCaller = "(others: more distinct names than replay keeps)"

// whoBuckets is how many of the most throttled buckets are broken down;
// whoTop how many names of each are shown, whoCapacity how many each
// summary keeps.
const (
	whoBuckets  = 50
	whoTop      = 5
	whoCapacity = 64
)

// callers interns the names of who made the calls, each dimension's to 16
// bits of a caller: principal | user agent<<16 | source<<32 | action<<48.
type callers struct {
	names [dims][]string
	ids   [dims]map[string]uint16
}

func (c *callers) intern(d int, s string) uint64 {
	if c.ids[d] == nil {
		c.ids[d] = map[string]uint16{}
	}
	if id, ok := c.ids[d][s]; ok {
		return uint64(id)
	}
	if len(c.names[d]) >= maxCallerNames {
		return maxCallerNames
	}
	id := uint16(len(c.names[d]))
	c.names[d] = append(c.names[d], s)
	c.ids[d][s] = id
	return uint64(id)
}

// id returns the caller of a record.
func (c *callers) id(rec *Record) uint64 {
	return c.intern(dimPrincipal, rec.Principal) | c.intern(dimUserAgent, rec.UserAgent)<<16 |
		c.intern(dimSource, rec.SourceIP)<<32 | c.intern(dimAction, rec.Action)<<48
}

// name returns the name of dimension d of caller x.
func (c *callers) name(x uint64, d int) string {
	id := int(x >> (16 * d) & 0xffff)
	if id >= len(c.names[d]) {
		return otherCaller
	}
	if s := c.names[d][id]; s != "" {
		return s
	}
	return "-"
}

// compare orders two callers by their names, not the order they were
// first seen in.
func (c *callers) compare(a, b uint64) int {
	if a == b {
		return 0
	}
	for d := range dims {
		if r := strings.Compare(c.name(a, d), c.name(b, d)); r != 0 {
			return r
		}
	}
	return 0
}

// Who is who made a throttled bucket's calls and what they called.
type Who struct {
	// Principals are userIdentity ARNs, UserAgents userAgent,
	// Sources sourceIPAddress, Actions eventName.
	Principals Tops `json:"principals"`
	UserAgents Tops `json:"user_agents"`
	Sources    Tops `json:"sources"`
	Actions    Tops `json:"actions"`
}

// Tops are the names with the most calls, and with the most calls
// throttled (without retries).
type Tops struct {
	ByCalls     []Top `json:"by_calls"`
	ByThrottles []Top `json:"by_throttles"`
}

// Top is one name and its count: exact when Err is 0, else an estimate
// (Space-Saving) at most Err above the truth.
type Top struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
	Err   int64  `json:"err,omitempty"`
}

// who plays the trace again for the most throttled buckets, into their
// Who, indexed like stats (nil for the others).
func (r *run) who() ([]*Who, error) {
	var idx []int
	for i := range r.stats.len() {
		if r.stats.at(i).throttled > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(r.stats.at(b).throttled, r.stats.at(a).throttled) })
	idx = idx[:min(len(idx), whoBuckets)]
	type sums struct {
		calls, throttles [dims]*spacesaving.Summary
	}
	slot := make(map[int32]*sums, len(idx))
	for _, i := range idx {
		s := &sums{}
		for d := range dims {
			s.calls[d], s.throttles[d] = spacesaving.New(whoCapacity), spacesaving.New(whoCapacity)
		}
		slot[int32(i)] = s
	}
	var key [2]byte
	err := r.trace.play(func(b int32, _ int64, caller uint64, flags uint8) {
		s := slot[b]
		if s == nil || flags&traceToken != 0 {
			return
		}
		for d := range dims {
			key[0], key[1] = byte(caller>>(16*d)), byte(caller>>(16*d+8))
			s.calls[d].Add(key[:], 1)
			if flags&traceThrottled != 0 {
				s.throttles[d].Add(key[:], 1)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Who, r.stats.len())
	for b, s := range slot {
		w := &Who{}
		for d, t := range []*Tops{&w.Principals, &w.UserAgents, &w.Sources, &w.Actions} {
			t.ByCalls = r.tops(s.calls[d], d)
			t.ByThrottles = r.tops(s.throttles[d], d)
		}
		out[b] = w
	}
	return out, nil
}

// tops returns the top names of a summary of dimension d, most first, by
// name for equal counts.
func (r *run) tops(s *spacesaving.Summary, d int) []Top {
	var out []Top
	for _, e := range s.Entries() {
		id := uint64(e.Key[0]) | uint64(e.Key[1])<<8
		out = append(out, Top{Name: r.callers.name(id<<(16*d), d), Count: int64(e.Count), Err: int64(e.Err)})
	}
	slices.SortFunc(out, func(a, b Top) int { return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name)) })
	return out[:min(len(out), whoTop)]
}

// writeWho writes who made the calls of each bucket that has a Who.
func (r *Report) writeWho(w io.Writer) {
	for _, b := range r.Buckets {
		if b.Who == nil {
			continue
		}
		fmt.Fprintf(w, "who and what: %s %s %s/%s (%d of %d calls throttled)\n", b.Account, b.Region, b.Service, b.Category, b.Throttled, b.Calls)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  \tby calls\t\tby throttles\t\t")
		for _, row := range b.Who.rows() {
			for i := range max(len(row.tops.ByCalls), len(row.tops.ByThrottles)) {
				label := ""
				if i == 0 {
					label = row.label
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", label, topAt(row.tops.ByCalls, i, false), topAt(row.tops.ByCalls, i, true),
					topAt(row.tops.ByThrottles, i, false), topAt(row.tops.ByThrottles, i, true))
			}
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
}

// whoRow is one dimension of a Who, labelled.
type whoRow struct {
	label string
	tops  Tops
}

func (w *Who) rows() []whoRow {
	return []whoRow{{"principal", w.Principals}, {"user agent", w.UserAgents}, {"source", w.Sources}, {"action", w.Actions}}
}

// topAt is the name (or, with count, the count) of the i-th top; "" past
// the end. An estimate is marked "≤".
func topAt(ts []Top, i int, count bool) string {
	if i >= len(ts) {
		return ""
	}
	if !count {
		return ts[i].Name
	}
	if ts[i].Err > 0 {
		return fmt.Sprintf("≤%d", ts[i].Count)
	}
	return strconv.FormatInt(ts[i].Count, 10)
}

// writeWhoHTML writes who made the calls of each bucket that has a Who, a
// table a bucket.
func (r *Report) writeWhoHTML(b *bufio.Writer, esc func(string) string) {
	first := true
	for _, k := range r.Buckets {
		if k.Who == nil {
			continue
		}
		if first {
			b.WriteString("\n<h2>Who and what</h2>\n<p class=\"dim\">The most throttled buckets' top callers and actions, by calls and by calls throttled (without retries); ≤: an estimate, never below the truth.</p>\n")
			first = false
		}
		fmt.Fprintf(b, "<table class=\"who\">\n<caption>%s %s %s/%s: %d of %d calls throttled</caption>\n<thead><tr><th></th><th>by calls</th><th></th><th>by throttles</th><th></th></tr></thead>\n<tbody>\n",
			esc(k.Account), esc(k.Region), esc(k.Service), esc(k.Category), k.Throttled, k.Calls)
		for _, row := range k.Who.rows() {
			for i := range max(len(row.tops.ByCalls), len(row.tops.ByThrottles)) {
				label := ""
				if i == 0 {
					label = row.label
				}
				fmt.Fprintf(b, "<tr><th>%s</th><td class=\"name\">%s</td><td>%s</td><td class=\"name\">%s</td><td>%s</td></tr>\n", esc(label),
					esc(topAt(row.tops.ByCalls, i, false)), esc(topAt(row.tops.ByCalls, i, true)),
					esc(topAt(row.tops.ByThrottles, i, false)), esc(topAt(row.tops.ByThrottles, i, true)))
			}
		}
		b.WriteString("</tbody>\n</table>\n")
	}
}
