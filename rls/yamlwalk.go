package rls

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/quota"
)

// The YAML walker: one yaml.Node tree, known fields checked per level,
// every problem recorded with its line, column and field path.

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	e := &quota.FieldError{File: p.name, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

// yamlError turns a YAML syntax error ("yaml: line 3: …") into a
// FieldError with its line.
func yamlError(file string, err error) *quota.FieldError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	fe := &quota.FieldError{File: file, Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ":"); ok {
			if n, err := strconv.Atoi(num); err == nil {
				fe.Line, fe.Msg = n, strings.TrimSpace(tail)
			}
		}
	}
	return fe
}

// resolve follows an alias and counts the node against the file's budget;
// it returns nil once the budget is spent.
func (p *parser) resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	p.nodes++
	if p.nodes == maxNodes {
		p.errorf(n, "", "more than %d YAML nodes (aliases expanded); refusing the file", maxNodes)
	}
	if p.nodes >= maxNodes {
		return nil
	}
	return n
}

type fieldFunc func(key, val *yaml.Node, field string)

// fields walks a mapping, calling each for every key; unknown keys and keys
// given twice are errors.
func (p *parser) fields(n *yaml.Node, path string, each map[string]fieldFunc) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := p.resolve(n.Content[i]), p.resolve(n.Content[i+1])
		if k == nil || v == nil {
			return
		}
		field := joinField(path, k.Value)
		if seen[k.Value] {
			p.errorf(k, field, "given twice")
			continue
		}
		seen[k.Value] = true
		f, ok := each[k.Value]
		if !ok {
			p.errorf(k, field, "unknown field (known here: %s)", knownFields(each))
			continue
		}
		f(k, v, field)
	}
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func knownFields(m map[string]fieldFunc) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// str reads a scalar as text, as envoy ratelimit's YAML library does for a
// string field (so `value: 200` is "200"); null is "".
func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	if isNull(n) {
		return "", true
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, field, "want a string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

// boolean reads true/false, and the YAML 1.1 spellings envoy ratelimit's
// YAML library also takes (yes/no, on/off); null is false.
func (p *parser) boolean(n *yaml.Node, field string) bool {
	if isNull(n) {
		return false
	}
	if n.Kind == yaml.ScalarNode {
		switch strings.ToLower(n.Value) {
		case "true", "yes", "y", "on":
			return true
		case "false", "no", "n", "off":
			return false
		}
	}
	p.errorf(n, field, "want true or false, got %s", kindName(n))
	return false
}

func (p *parser) list(n *yaml.Node, field string) []*yaml.Node {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, field, "want a list, got %s", kindName(n))
		return nil
	}
	return n.Content
}
