package rls

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/internal/yamlfield"
)

// ErrInvalidConfig is matched (with errors.Is) by every error of [Load] and
// [Parse]. It is config.ErrInvalidConfig: config problems of every kind are
// reported as config.FieldErrors, "file:line:column: field: message".
var ErrInvalidConfig = yamlfield.ErrInvalidConfig

// maxNodes bounds the YAML nodes walked per file, aliases expanded, so that
// a file of nested aliases cannot make the walk exponential.
const maxNodes = 1 << 20

// maxDepth bounds the nesting of descriptor lists; a request can have no
// more entries than MaxEntries, so deeper rules could never match.
const maxDepth = MaxEntries

// LoadOptions tune [Load] and [Parse]. The zero value accepts what envoy
// ratelimit accepts with its default settings.
type LoadOptions struct {
	// MaxWindow, when positive, is the longest refill window a limit may
	// have: a rule whose bucket takes longer to refill (a YEAR limit on
	// the Redis store, whose bound is limiter/redis.MaxWindow) is an error
	// of the file that holds it.
	MaxWindow time.Duration
	// MergeDomains lets several files add descriptors to one domain
	// (envoy ratelimit's MERGE_DOMAIN_CONFIG); by default a domain given
	// twice is an error.
	MergeDomains bool
	// Timeout bounds the reading of [Load]; 0 means DefaultLoadTimeout.
	Timeout time.Duration
}

// File is one config file's name (used in errors) and contents.
type File struct {
	Name string
	Data []byte
}

// Parse parses envoy ratelimit config files, each holding one domain:
//
//	domain: messaging
//	descriptors:
//	  - key: message_type
//	    value: marketing            # optional: absent matches any value
//	    descriptors:                # nested: the next entry of a descriptor
//	      - key: to_number
//	        rate_limit:
//	          unit: day               # second, minute, hour, day, week, month, year
//	          requests_per_unit: 5
//	          name: marketing       # optional, for replaces
//	          replaces: [{name: other}]
//	        shadow_mode: false
//
// It makes the checks of envoy ratelimit's loadDescriptors (an empty key or
// domain, a composite key given twice in one list, a unit given with
// unlimited, an unknown unit, an empty or self-naming replaces entry,
// share_threshold without a wildcard, a domain in two files), checks every
// field's place and type, and reports every problem as config.ConfigErrors.
func Parse(files []File, opts LoadOptions) (*Config, error) {
	p := &parser{opts: opts, cfg: &Config{domains: map[string]*level{}}, domainAt: map[string]string{}}
	p.w = yamlfield.Walker{KnownLabel: "known here", Resolve: p.resolve, Kind: kindName}
	for _, f := range files {
		p.file(f)
	}
	if len(p.w.Errs) > 0 {
		return nil, p.w.Errs
	}
	return p.cfg, nil
}

type parser struct {
	opts     LoadOptions
	cfg      *Config
	w        yamlfield.Walker  // holds every problem of every file
	name     string            // the file being read
	nodes    int               // nodes walked in this file
	domainAt map[string]string // where each domain was defined
}

func (p *parser) file(f File) {
	p.name, p.nodes = f.Name, 0
	p.cfg.files = append(p.cfg.files, f.Name)
	p.w.File = f.Name
	root, second, ferr := decodeFirst(f.Name, f.Data)
	if ferr != nil {
		p.w.Errs = append(p.w.Errs, ferr)
		return
	}
	if second > 0 {
		p.cfg.warnings = append(p.cfg.warnings, fmt.Sprintf("%s:%d: a second YAML document; only the first is loaded, as envoy ratelimit loads it", f.Name, second))
	}
	if root == nil {
		p.errorf(nil, "", "the file is empty; it needs a domain")
		return
	}
	p.root(root)
}

// decodeFirst decodes the first YAML document of data, as envoy
// ratelimit's YAML library does, and reports the line of a second one (0
// when there is none). A syntax error anywhere is an error: a file that
// does not parse is not half loaded.
func decodeFirst(file string, data []byte) (*yaml.Node, int, *yamlfield.FieldError) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, 0, yamlfield.SyntaxError(file, data, err)
	}
	var extra yaml.Node
	second := 0
	if err := dec.Decode(&extra); err == nil {
		second = max(extra.Line, 1)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, second, nil
	}
	return doc.Content[0], second, nil
}

func (p *parser) root(n *yaml.Node) {
	if n = p.resolve(n); n == nil {
		return
	}
	var domain string
	var domainNode, descs *yaml.Node
	p.fields(n, "", map[string]fieldFunc{
		"domain": func(_, v *yaml.Node, f string) {
			domainNode = v
			domain, _ = p.str(v, f)
		},
		"descriptors": func(_, v *yaml.Node, _ string) { descs = v },
	})
	if n.Kind != yaml.MappingNode {
		return
	}
	if domain == "" {
		at := domainNode
		if at == nil {
			at = n
		}
		p.errorf(at, "domain", "config file cannot have an empty domain")
		return
	}
	lvl := p.cfg.domains[domain]
	if lvl != nil && !p.opts.MergeDomains {
		p.errorf(domainNode, "domain", "duplicate domain %q: also in %s (set merge to combine files of one domain)", domain, p.domainAt[domain])
		return
	}
	if lvl == nil {
		lvl = &level{children: map[string]*level{}}
		p.cfg.domains[domain] = lvl
		p.cfg.order = append(p.cfg.order, domain)
		p.domainAt[domain] = fmt.Sprintf("%s:%d", p.name, domainNode.Line)
	}
	if descs != nil {
		p.descriptors(lvl, domain, "", descs, "descriptors", 1)
	}
}

// descriptors loads one descriptor list into lvl. parentKey is the
// composite key path above it ("" at the top).
func (p *parser) descriptors(lvl *level, domain, parentKey string, n *yaml.Node, field string, depth int) {
	if depth > maxDepth {
		p.errorf(n, field, "descriptors nested deeper than %d levels", maxDepth)
		return
	}
	firstAt := map[string]int{} // composite key -> line, within this file's list
	for i, d := range p.list(n, field) {
		if d = p.resolve(d); d == nil {
			return
		}
		p.descriptor(lvl, domain, parentKey, d, fmt.Sprintf("%s[%d]", field, i), firstAt, depth)
	}
}

func (p *parser) descriptor(parent *level, domain, parentKey string, n *yaml.Node, path string, firstAt map[string]int, depth int) {
	var (
		key, value                string
		keyNode, rateNode, nested *yaml.Node
		shareNode                 *yaml.Node
		shadow, quotaMode         bool
		detailed, valueToMetric   bool
		share                     bool
	)
	p.fields(n, path, map[string]fieldFunc{
		"key":   func(_, v *yaml.Node, f string) { keyNode = v; key, _ = p.str(v, f) },
		"value": func(_, v *yaml.Node, f string) { value, _ = p.str(v, f) },
		"rate_limit": func(_, v *yaml.Node, _ string) {
			if !isNull(v) {
				rateNode = v
			}
		},
		"descriptors":     func(_, v *yaml.Node, _ string) { nested = v },
		"shadow_mode":     func(_, v *yaml.Node, f string) { shadow = p.boolean(v, f) },
		"quota_mode":      func(_, v *yaml.Node, f string) { quotaMode = p.boolean(v, f) },
		"detailed_metric": func(_, v *yaml.Node, f string) { detailed = p.boolean(v, f) },
		"value_to_metric": func(_, v *yaml.Node, f string) { valueToMetric = p.boolean(v, f) },
		"share_threshold": func(k, v *yaml.Node, f string) { shareNode = k; share = p.boolean(v, f) },
		"metadata": func(_, v *yaml.Node, f string) {
			// Dynamic metadata is not sent; the block is checked for shape only.
			if !isNull(v) && v.Kind != yaml.MappingNode {
				p.errorf(v, f, "want a mapping, got %s", kindName(v))
			}
		},
	})
	if n.Kind != yaml.MappingNode {
		return
	}
	if key == "" {
		at := keyNode
		if at == nil {
			at = n
		}
		p.errorf(at, path+".key", "descriptor has an empty key")
		return
	}
	composite := key
	if value != "" {
		composite += "_" + value
	}
	fullKey := composite
	if parentKey != "" {
		fullKey = parentKey + "." + composite
	}
	if _, dup := parent.children[composite]; dup {
		where := "another file"
		if line, ok := firstAt[composite]; ok {
			where = fmt.Sprintf("line %d", line)
		}
		p.errorf(keyNode, path+".key", "duplicate descriptor composite key %q (first at %s)", domain+"."+fullKey, where)
		return
	}
	firstAt[composite] = keyNode.Line
	lvl := &level{children: map[string]*level{}}
	wild := strings.Contains(composite, "*")
	if share {
		if !wild {
			p.errorf(shareNode, path+".share_threshold", "share_threshold can only be used with wildcard values (containing '*'), but found key %q", composite)
		} else {
			lvl.share = composite
		}
	}
	if rateNode != nil {
		lvl.rule = p.rateLimit(rateNode, path+".rate_limit", &Rule{
			Domain: domain, Key: fullKey,
			ShadowMode: shadow, QuotaMode: quotaMode,
			DetailedMetric: detailed, ValueToMetric: valueToMetric,
			File: p.name, Line: rateNode.Line,
		})
	}
	if wild {
		parent.wildcards = append(parent.wildcards, wildcard{key: composite, parts: strings.Split(composite, "*")})
	}
	parent.children[composite] = lvl
	if nested != nil {
		p.descriptors(lvl, domain, fullKey, nested, path+".descriptors", depth+1)
	}
}

// rateLimit reads a rate_limit block into r; it returns nil if the block
// is invalid.
func (p *parser) rateLimit(n *yaml.Node, path string, r *Rule) *Rule {
	var (
		unit              string
		unitNode, rpuNode *yaml.Node
		replaces          []*yaml.Node
		rpu               uint32
		before            = len(p.w.Errs)
	)
	p.fields(n, path, map[string]fieldFunc{
		"unit": func(_, v *yaml.Node, f string) {
			unitNode = v
			unit, _ = p.str(v, f)
		},
		"requests_per_unit": func(_, v *yaml.Node, f string) {
			rpuNode = v
			if isNull(v) {
				return
			}
			if v.Kind == yaml.ScalarNode && quoted(v) {
				p.errorf(v, f, "want a whole number, got the quoted string %q (envoy ratelimit refuses it too)", v.Value)
				return
			}
			x, err := strconv.ParseUint(v.Value, 0, 32)
			if v.Kind != yaml.ScalarNode || err != nil {
				p.errorf(v, f, "want a whole number from 0 to %d, got %s", uint32(1<<32-1), kindName(v))
				return
			}
			rpu = uint32(x)
		},
		"unlimited": func(_, v *yaml.Node, f string) { r.Unlimited = p.boolean(v, f) },
		"name":      func(_, v *yaml.Node, f string) { r.Name, _ = p.str(v, f) },
		"replaces":  func(_, v *yaml.Node, f string) { replaces = p.list(v, f) },
	})
	if n.Kind != yaml.MappingNode {
		return nil
	}
	u, known := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unit)]
	valid := known && u != int32(rlspb.RateLimitResponse_RateLimit_UNKNOWN)
	switch {
	case r.Unlimited && valid:
		p.errorf(unitNode, path+".unit", "should not specify a rate limit unit when unlimited")
	case !r.Unlimited && !valid && unitNode == nil:
		p.errorf(n, path+".unit", "missing: want second, minute, hour, day, week, month or year (or unlimited: true)")
	case !r.Unlimited && !valid:
		p.errorf(unitNode, path+".unit", "invalid rate limit unit %q: want second, minute, hour, day, week, month or year", unit)
	}
	for i, e := range replaces {
		if e = p.resolve(e); e == nil {
			return nil
		}
		field := fmt.Sprintf("%s.replaces[%d]", path, i)
		var name string
		p.fields(e, field, map[string]fieldFunc{
			"name": func(_, v *yaml.Node, f string) { name, _ = p.str(v, f) },
		})
		switch {
		case e.Kind != yaml.MappingNode:
		case name == "":
			p.errorf(e, field+".name", "should not have an empty replaces entry")
		case name == r.Name:
			p.errorf(e, field+".name", "replaces should not contain the name of the same descriptor (%q)", name)
		default:
			r.Replaces = append(r.Replaces, name)
		}
	}
	if len(p.w.Errs) > before {
		return nil
	}
	r.RequestsPerUnit = rpu
	r.current = &rlspb.RateLimitResponse_RateLimit{Name: r.Name}
	if !r.Unlimited {
		r.Unit = Unit(u)
		r.current.RequestsPerUnit, r.current.Unit = rpu, r.Unit
		window := unitDurations[r.Unit]
		at := rpuNode
		if at == nil {
			at = n
		}
		lim, err := newLimit(rpu, window)
		if err != nil {
			p.errorf(at, path+".requests_per_unit", "%d per %s: %v", rpu, strings.ToLower(r.Unit.String()), err)
			return nil
		}
		if !lim.IsZero() && p.opts.MaxWindow > 0 {
			if w := time.Duration(lim.Capacity()) * lim.Interval(); w > p.opts.MaxWindow || w < 0 || lim.Interval() > p.opts.MaxWindow {
				p.errorf(unitNode, path+".unit", "%d per %s refills over %s, longer than the %s the store holds; use the memory store or a shorter unit",
					rpu, strings.ToLower(r.Unit.String()), days(window), days(p.opts.MaxWindow))
				return nil
			}
		}
		r.limit = lim
	}
	p.cfg.rules = append(p.cfg.rules, r)
	return r
}

// days formats a long duration in days, to a tenth ("365 days", "52.1
// days").
func days(d time.Duration) string {
	if d < 48*time.Hour {
		return d.String()
	}
	return strconv.FormatFloat(math.Round(d.Hours()/2.4)/10, 'f', -1, 64) + " days"
}
