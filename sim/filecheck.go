package sim

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/internal/yamlfield"
)

// checker walks a scenario file's YAML nodes against the Go type they
// decode into, the way package config walks a config file: every unknown
// field, key given twice and value of the wrong kind becomes a FileError
// with its line, column and field path, before any decoding. The struct
// decoder's own messages name Go types; these name the file's fields.
type checker struct {
	// w records the problems, as config's parser does; ParseStudy turns
	// each into a FileError.
	w yamlfield.Walker
	// seen holds anchored nodes already walked for a type: an alias (or
	// a << merge) of one is not walked again, so a file of nested aliases
	// costs no more than its size.
	seen map[seenKey]bool
}

type seenKey struct {
	n *yaml.Node
	t reflect.Type
}

// maxCheckDepth bounds the nesting the checker follows.
const maxCheckDepth = 64

var durationType = reflect.TypeFor[time.Duration]()

func (c *checker) errorf(n *yaml.Node, path []any, format string, args ...any) {
	c.w.Errorf(n, pathString(path), format, args...)
}

// errs returns the problems found, as FileErrors in file order.
func (c *checker) errs() []error {
	out := make([]error, len(c.w.Errs))
	for i, e := range c.w.Errs {
		out[i] = &FileError{File: e.File, Line: e.Line, Column: e.Column, Field: e.Field, Msg: e.Msg}
	}
	return out
}

// check walks n as a value of type t at path.
func (c *checker) check(n *yaml.Node, t reflect.Type, path []any, depth int) {
	if depth > maxCheckDepth {
		c.errorf(n, path, "nested more than %d levels deep", maxCheckDepth)
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return
		}
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Anchor != "" {
		k := seenKey{n, t}
		if c.seen[k] {
			return
		}
		if c.seen == nil {
			c.seen = make(map[seenKey]bool)
		}
		c.seen[k] = true
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an empty value leaves the field at its zero value
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == durationType {
			break
		}
		c.mapping(n, t, path, depth)
		return
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			c.errorf(n, path, "want a list, got %s", nodeKind(n))
			return
		}
		for i, item := range n.Content {
			c.check(item, t.Elem(), append(slices.Clip(path), i), depth+1)
		}
		return
	}
	c.scalar(n, t, path)
}

// mapping walks a mapping node against struct type t: its keys (with
// those of << merges) must be fields of t, each given once.
func (c *checker) mapping(n *yaml.Node, t reflect.Type, path []any, depth int) {
	fields := yamlFields(t)
	each := make(map[string]yamlfield.FieldFunc, len(fields))
	for name, ft := range fields {
		each[name] = func(_, v *yaml.Node, _ string) {
			c.check(v, ft, append(slices.Clip(path), name), depth+1)
		}
	}
	w := &c.w
	w.Kind, w.Merge = nodeKind, func(v *yaml.Node) { c.merge(v, t, path, depth) }
	w.Fields(n, pathString(path), each)
}

// merge walks the value of a << key: a mapping, an alias of one, or a
// list of those.
func (c *checker) merge(v *yaml.Node, t reflect.Type, path []any, depth int) {
	src := v
	if src.Kind == yaml.AliasNode && src.Alias != nil {
		src = src.Alias
	}
	if src.Kind == yaml.SequenceNode {
		for _, m := range src.Content {
			c.check(m, t, path, depth+1)
		}
		return
	}
	c.check(v, t, path, depth+1)
}

// scalar checks that n decodes as a value of the scalar type t.
func (c *checker) scalar(n *yaml.Node, t reflect.Type, path []any) {
	if n.Kind != yaml.ScalarNode {
		c.errorf(n, path, "want %s, got %s", scalarWant(t), nodeKind(n))
		return
	}
	// The YAML decoder would truncate 1.5 to 1 for a whole-number
	// field; the value's resolved tag must be what the field holds.
	tag := n.ShortTag()
	ok := true
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint64:
		ok = tag == "!!int" || t == durationType
	case reflect.Float64:
		ok = tag == "!!int" || tag == "!!float"
	case reflect.Bool:
		ok = tag == "!!bool"
	}
	if !ok || n.Decode(reflect.New(t).Interface()) != nil {
		c.errorf(n, path, "want %s, got %s", scalarWant(t), nodeKind(n))
	}
}

// scalarWant describes the values of scalar type t.
func scalarWant(t reflect.Type) string {
	if t == durationType {
		return `a duration such as "1.5s", "200ms" or "10m"`
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Uint64:
		return "a whole number, not negative"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// nodeKind describes a node for an error message as yamlfield.KindName
// does, but quoting only a scalar's first 40 characters.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		return yamlfield.KindName(n)
	case yaml.ScalarNode:
		v := n.Value
		if r := []rune(v); len(r) > 40 {
			v = string(r[:40]) + "…"
		}
		return fmt.Sprintf("%q", v)
	}
	return "an alias"
}

// yamlFields maps the yaml names of struct type t's fields, those of
// inline fields included, to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if opts == "inline" {
			for k, v := range yamlFields(f.Type) {
				m[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}
