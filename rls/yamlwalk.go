package rls

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/internal/yamlfield"
)

// Reading envoy's YAML with the shared walker (internal/yamlfield): one
// yaml.Node tree, known fields checked per level, every problem recorded
// with its line, column and field path; aliases count against a budget.

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	p.w.Errorf(n, field, format, args...)
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

type fieldFunc = yamlfield.FieldFunc

// fields walks a mapping, calling each for every key; unknown keys and keys
// given twice are errors. The walker resolves each node with p.resolve.
func (p *parser) fields(n *yaml.Node, path string, each map[string]fieldFunc) {
	p.w.Fields(n, path, each)
}

// kindName describes a node as config's walker does (yamlfield.KindName),
// but null and an unresolved alias as "nothing".
func kindName(n *yaml.Node) string {
	if isNull(n) || n.Kind == yaml.AliasNode {
		return "nothing"
	}
	return yamlfield.KindName(n)
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

// quoted reports whether a scalar was written in quotes: a string to
// envoy ratelimit's YAML library whatever it spells.
func quoted(n *yaml.Node) bool {
	return n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 || n.Tag == "!!str" && n.Style&yaml.TaggedStyle != 0
}

// boolean reads true/false, and the YAML 1.1 spellings envoy ratelimit's
// YAML library also takes (yes/no, on/off); null is false. A quoted value
// ("yes", "true") is a string, refused as envoy ratelimit refuses it.
func (p *parser) boolean(n *yaml.Node, field string) bool {
	if isNull(n) {
		return false
	}
	if n.Kind == yaml.ScalarNode && quoted(n) {
		p.errorf(n, field, "want true or false, got the quoted string %q (envoy ratelimit refuses it too)", n.Value)
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
