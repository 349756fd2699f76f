package config

// This file is the parser's typed reads of YAML nodes: strings, names,
// numbers, lists and limits, each error naming file:line:col and field.

import (
	"regexp"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/yamlfield"
	"go.yaml.in/yaml/v3"
)

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	p.w.Errorf(n, field, format, args...)
}

// fields walks a mapping node, calling each for every key; unknown keys and
// keys given twice are errors.
func (p *parser) fields(n *yaml.Node, path string, each map[string]func(key, val *yaml.Node, field string)) {
	p.w.Fields(n, path, each)
}

func joinField(path, name string) string { return yamlfield.JoinField(path, name) }

func kindName(n *yaml.Node) string { return yamlfield.KindName(n) }

func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, field, "want a string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) name(n *yaml.Node, field string, re *regexp.Regexp, what string) (string, bool) {
	s, ok := p.str(n, field)
	if !ok {
		return "", false
	}
	if !re.MatchString(s) {
		p.errorf(n, field, "%q is not a valid %s (want %s)", s, what, re)
		return "", false
	}
	return s, true
}

func (p *parser) integer(n *yaml.Node, field string) (int64, bool) {
	var v int64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		p.errorf(n, field, "want a whole number, got %s", kindName(n))
		return 0, false
	}
	return v, true
}

func (p *parser) number(n *yaml.Node, field string) (float64, bool) {
	var v float64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		p.errorf(n, field, "want a number, got %s", kindName(n))
		return 0, false
	}
	return v, true
}

func (p *parser) list(n *yaml.Node, field string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, field, "want a list, got %s", kindName(n))
		return nil
	}
	return n.Content
}

// limitFields reads capacity and refill_per_second into a limit.
type limitFields struct {
	capacity    int64
	refill      float64
	hasCapacity bool
	hasRefill   bool
	capNode     *yaml.Node
	refillNode  *yaml.Node
}

func (p *parser) limitHandlers(lf *limitFields, m map[string]func(key, val *yaml.Node, field string)) {
	m["capacity"] = func(_, v *yaml.Node, f string) {
		lf.capNode = v
		if c, ok := p.integer(v, f); ok {
			if c < 1 {
				p.errorf(v, f, "capacity %d must be at least 1", c)
				return
			}
			lf.capacity, lf.hasCapacity = c, true
		}
	}
	m["refill_per_second"] = func(_, v *yaml.Node, f string) {
		lf.refillNode = v
		if r, ok := p.number(v, f); ok {
			if !(r > 0) {
				p.errorf(v, f, "refill_per_second %v must be greater than 0", r)
				return
			}
			lf.refill, lf.hasRefill = r, true
		}
	}
}

func (p *parser) limit(n *yaml.Node, path string, lf *limitFields) (bucket.Limit, bool) {
	if lf.capNode == nil {
		p.errorf(n, joinField(path, "capacity"), "missing")
	}
	if lf.refillNode == nil {
		p.errorf(n, joinField(path, "refill_per_second"), "missing")
	}
	if !lf.hasCapacity || !lf.hasRefill {
		return bucket.Limit{}, false
	}
	l, err := bucket.NewLimit(lf.capacity, lf.refill)
	if err != nil {
		// Both values are valid on their own here, so the limit fails on
		// the rate (above 1e9/s) or on the two together (too slow to
		// refill): name the rate when it alone is out of range.
		node, field := lf.capNode, "capacity"
		if lf.refill > 1e9 {
			node, field = lf.refillNode, "refill_per_second"
		}
		p.errorf(node, joinField(path, field), "%v", err)
		return bucket.Limit{}, false
	}
	return l, true
}
