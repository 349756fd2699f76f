package rls

import (
	"fmt"
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate/tollgate/bucket"
)

// Unit is a rate limit's unit of time, as envoy's protocol names it.
type Unit = rlspb.RateLimitResponse_RateLimit_Unit

// unitDurations are the units envoy ratelimit knows, with the window it
// gives each (a month is 30 days, a year 365, as in its UnitToDivider).
var unitDurations = map[Unit]time.Duration{
	rlspb.RateLimitResponse_RateLimit_SECOND: time.Second,
	rlspb.RateLimitResponse_RateLimit_MINUTE: time.Minute,
	rlspb.RateLimitResponse_RateLimit_HOUR:   time.Hour,
	rlspb.RateLimitResponse_RateLimit_DAY:    24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_WEEK:   7 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_MONTH:  30 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_YEAR:   365 * 24 * time.Hour,
}

// UnitDuration is the refill window of unit: the time in which a bucket of
// requests_per_unit tokens refills completely. It reports false for
// UNKNOWN and values outside the enum.
func UnitDuration(u Unit) (time.Duration, bool) {
	d, ok := unitDurations[u]
	return d, ok
}

// Rule is one rate_limit block of an envoy ratelimit config: what a
// descriptor that reaches it is limited to. Rules are shared by every
// request that matches them and must not be changed.
type Rule struct {
	// Domain is the config's domain.
	Domain string
	// Key is the rule's place in its domain as envoy ratelimit names its
	// statistics: the composite keys from the top, joined by dots, e.g.
	// "message_type_marketing.to_number".
	Key string
	// Name is rate_limit.name: what other rules' replaces refer to.
	Name string
	// Replaces are the names of rules this one replaces when both match
	// one request.
	Replaces []string
	// RequestsPerUnit is the bucket's capacity, refilled over one Unit. 0
	// denies every hit, as in envoy ratelimit.
	RequestsPerUnit uint32
	// Unit is the refill window; UNKNOWN for an unlimited rule.
	Unit Unit
	// Unlimited rules are answered OK locally, never counted against a
	// bucket.
	Unlimited bool
	// ShadowMode rules decide and count but always answer OK.
	ShadowMode bool
	// QuotaMode rules make a request over limit only when every quota-mode
	// descriptor of it is over limit.
	QuotaMode bool
	// DetailedMetric and ValueToMetric are read for compatibility; tollgate
	// keeps one metric series per rule (bounded cardinality) either way.
	DetailedMetric, ValueToMetric bool
	// File and Line locate the rule's rate_limit block.
	File string
	Line int

	limit   bucket.Limit // zero when Unlimited or RequestsPerUnit is 0
	current *rlspb.RateLimitResponse_RateLimit
}

// Limit is the rule's token bucket: capacity RequestsPerUnit, refilled at
// RequestsPerUnit per Unit. It is the zero Limit for unlimited rules and
// rules of 0 requests per unit, which need no bucket.
func (r *Rule) Limit() bucket.Limit { return r.limit }

// String describes the rule, e.g. "messaging.to_number: 100 per DAY".
func (r *Rule) String() string {
	if r.Unlimited {
		return r.Domain + "." + r.Key + ": unlimited"
	}
	return fmt.Sprintf("%s.%s: %d per %s", r.Domain, r.Key, r.RequestsPerUnit, r.Unit)
}

// newLimit is the token bucket of n requests per window: capacity n,
// refilled at n per window. n = 0 needs no bucket and gives the zero Limit.
//
// A rate above 10⁹ per second, which envoy ratelimit accepts (e.g. 4·10⁹
// per second), refills at 10⁹ per second, the finest a bucket of whole
// nanoseconds holds: no server answers that many requests, so the rule
// still never denies a caller it would have admitted.
func newLimit(n uint32, window time.Duration) (bucket.Limit, error) {
	if n == 0 {
		return bucket.Limit{}, nil
	}
	return bucket.NewLimit(int64(n), min(float64(n)/window.Seconds(), maxRate))
}

// maxRate is the fastest refill a bucket holds: one token a nanosecond.
const maxRate = 1e9

// Config is a loaded set of envoy ratelimit config files: the descriptor
// trees of every domain. It is immutable and safe for concurrent use; the
// zero Config (or nil) has no domains, so every descriptor is answered OK
// with no limit.
type Config struct {
	domains  map[string]*level
	order    []string // domains in load order
	rules    []*Rule
	files    []string
	warnings []string
	digest   string // of the files it was loaded from (Load); "" when parsed
}

// Digest is a hash of the names and contents of the files the config was
// loaded from ([Load]), "" for one built by Parse; compare it with
// [DirDigest] to tell whether the files changed since.
func (c *Config) Digest() string {
	if c == nil {
		return ""
	}
	return c.digest
}

// Warnings lists what loaded but was likely not meant, one line each with
// its file and line (a second YAML document in a file, which envoy
// ratelimit ignores too).
func (c *Config) Warnings() []string {
	if c == nil {
		return nil
	}
	return c.warnings
}

// level is one descriptor list: the children of a domain or descriptor.
type level struct {
	children  map[string]*level // by composite key: "key" or "key_value"
	wildcards []wildcard        // composite keys holding '*', in file order
	rule      *Rule
	// share is the composite key's wildcard pattern when share_threshold is
	// set: every value it matches shares one bucket.
	share string
}

type wildcard struct {
	key   string   // the composite key, e.g. "path_/api/*/action"
	parts []string // key split at '*'
}

// Domains lists the config's domains, in load order.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	return c.order
}

// Rules lists every rule, in file order.
func (c *Config) Rules() []*Rule {
	if c == nil {
		return nil
	}
	return c.rules
}

// Files lists the files the config was read from, in load order.
func (c *Config) Files() []string {
	if c == nil {
		return nil
	}
	return c.files
}

// Match is what a descriptor matched.
type Match struct {
	// Rule is the matched rule; nil when the descriptor matches none.
	Rule *Rule
	// Shared holds, for each entry matched through a wildcard whose rule
	// has share_threshold, the wildcard pattern that stands for the
	// entry's value in the bucket key; nil when none did.
	Shared map[int]string
}

// Lookup finds the rule of one descriptor of domain, with envoy
// ratelimit's rules (rateLimitConfigImpl.GetLimit):
//
//   - the entries are matched level by level from the domain down; a
//     descriptor matches a rule only if its last entry reaches a rule
//     (a request with more or fewer entries than the config's nesting
//     matches nothing);
//   - at each level "key_value" is tried first, then the level's wildcard
//     values in file order, then the bare "key" (any value).
func (c *Config) Lookup(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) Match {
	var m Match
	if c == nil {
		return m
	}
	lvl := c.domains[domain]
	if lvl == nil {
		return m
	}
	var stack [128]byte // most entries fit: no allocation per lookup
	buf := stack[:0]
	for i, pe := range entries {
		e := struct{ Key, Value string }{pe.GetKey(), pe.GetValue()}
		buf = append(append(append(buf[:0], e.Key...), '_'), e.Value...)
		next := lvl.children[string(buf)]
		matched := ""
		if next == nil {
			for _, w := range lvl.wildcards {
				if wildcardMatch(w.parts, string(buf)) {
					next, matched = lvl.children[w.key], w.key
					break
				}
			}
		}
		if next == nil {
			next = lvl.children[e.Key]
		}
		if next == nil {
			break
		}
		if matched != "" && next.share != "" {
			if m.Shared == nil {
				m.Shared = map[int]string{}
			}
			m.Shared[i] = strings.TrimPrefix(next.share, e.Key+"_")
		}
		if next.rule != nil && i == len(entries)-1 {
			m.Rule = next.rule
		}
		if len(next.children) == 0 {
			break
		}
		lvl = next
	}
	if m.Rule == nil {
		m.Shared = nil
	}
	return m
}

// wildcardMatch reports whether value matches a pattern split at its '*'s,
// each of which matches zero or more bytes.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(value, first) || !strings.HasSuffix(value[len(first):], last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
