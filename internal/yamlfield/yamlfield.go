// Package yamlfield walks a YAML config file's node tree with the fields
// known at each level and reports every problem with its place, as
// "file:line:column: field.path: message". It is the one walker behind
// tollgate's config files (package config) and envoy's rate limit files
// (package rls); config re-exports its error types as config.FieldError
// and config.ConfigErrors.
//
// It never decodes into Go values and never stops at the first problem:
// a [Walker] collects every [FieldError] of a file in [Walker.Errs].
//
// # Lifecycle
//
//  1. [DecodeOne] reads the file's single YAML document.
//  2. A parser holding a [Walker] calls [Walker.Fields] on each mapping,
//     with one [FieldFunc] per known field, and [Walker.Errorf] for each
//     problem it finds in a value.
//  3. The parser returns [Walker.Errs] when it holds any error.
package yamlfield

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/internal/suggest"
)

// ErrInvalidConfig is matched (with errors.Is) by every [FieldError] and
// [Errors]; package config exports it as config.ErrInvalidConfig.
var ErrInvalidConfig = errors.New("invalid config")

// FieldError is one problem in a config file, located by file, line and
// field path (e.g. "services[0].categories[2].capacity").
type FieldError struct {
	File   string // the config file's name, as given to Parse or Load
	Line   int    // 1-based; 0 when the problem has no place (an empty file)
	Column int    // 1-based; 0 when unknown
	Field  string // the field's path, e.g. "overrides[1].capacity"; may be empty
	Msg    string // what is wrong
}

// Error formats the problem as "file:line:column: field: message".
func (e *FieldError) Error() string {
	return Format(e.File, e.Line, e.Column, e.Field, e.Msg)
}

// Is reports whether target is [ErrInvalidConfig].
func (e *FieldError) Is(target error) bool { return target == ErrInvalidConfig }

// Format formats a problem as "file:line:column: field: message", leaving
// out the line and column when line is 0, the column when it is 0, and
// the field when it is empty. Every config error of tollgate reads so.
func Format(file string, line, column int, field, msg string) string {
	var b strings.Builder
	b.WriteString(file)
	if line > 0 {
		fmt.Fprintf(&b, ":%d", line)
		if column > 0 {
			fmt.Fprintf(&b, ":%d", column)
		}
	}
	b.WriteString(": ")
	if field != "" {
		b.WriteString(field)
		b.WriteString(": ")
	}
	b.WriteString(msg)
	return b.String()
}

// Errors is every problem found in one config file, one per line of its
// message, in file order.
type Errors []*FieldError

// Error lists every problem, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the individual errors, so errors.As finds a *FieldError.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Is reports whether target is [ErrInvalidConfig].
func (es Errors) Is(target error) bool { return target == ErrInvalidConfig }

// DecodeOne decodes data, the file named file, which must hold at most one
// YAML document. It returns the document's root node, or nil for an empty
// file, or a FieldError for a syntax error or a second document.
func DecodeOne(file string, data []byte) (*yaml.Node, *FieldError) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, SyntaxError(file, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		line := 0
		if err == nil {
			line = extra.Line
		}
		return nil, &FieldError{File: file, Line: line, Msg: "a second YAML document: a config file holds one"}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// SyntaxError turns a YAML syntax error of data ("yaml: line 3: …") into
// a FieldError with the line and column where the problem is.
//
// The YAML parser names the line where the construct it was reading
// began (a list whose item is mis-indented is reported at the list's
// first line), not the line that breaks it. The line that breaks it is
// the first whose end makes a prefix of the file fail with the same
// message, and its column that line's first non-blank character; when
// no prefix does (a prefix may fail differently, inside a flow
// collection), the parser's line is kept.
func SyntaxError(file string, data []byte, err error) *FieldError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	fe := &FieldError{File: file, Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ":"); ok {
			if n, err := strconv.Atoi(num); err == nil {
				fe.Line, fe.Msg = n, strings.TrimSpace(tail)
			}
		}
	}
	if fe.Line > 0 {
		fe.Line, fe.Column = breakingLine(data, fe.Line, err.Error())
	}
	return fe
}

// maxPrefixParses and maxPrefixBytes bound the work breakingLine spends
// on one error: the parses, and the bytes they read in all.
const (
	maxPrefixParses = 200
	maxPrefixBytes  = 8 << 20
)

// breakingLine is the 1-based line and column of the first line, from
// line on, whose end makes a prefix of data fail to parse with the error
// text want; line and 0 when none does within the bounds above.
func breakingLine(data []byte, line int, want string) (int, int) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	end := 0
	for _, l := range lines[:min(line-1, len(lines))] {
		end += len(l)
	}
	read := 0
	for n := line; n <= len(lines) && n < line+maxPrefixParses; n++ {
		l := lines[n-1]
		end += len(l)
		if read += end; read > maxPrefixBytes {
			break
		}
		dec := yaml.NewDecoder(bytes.NewReader(data[:end]))
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err == nil || err == io.EOF {
			continue
		}
		if err.Error() != want {
			continue
		}
		col := len(l) - len(bytes.TrimLeft(l, " ")) + 1 // YAML indents with spaces only
		if len(bytes.TrimSpace(l)) == 0 {
			col = 0
		}
		return n, col
	}
	return line, 0
}

// FieldFunc handles one known field of a mapping: key and val are its
// nodes, field its path (e.g. "services[0].name").
type FieldFunc = func(key, val *yaml.Node, field string)

// Walker records the problems of one file. The zero Walker records
// problems of the file named "" with the defaults below.
type Walker struct {
	// File names the file in every FieldError.
	File string
	// Errs is every problem recorded so far, in the order found.
	Errs Errors
	// KnownLabel is the word before the list of known fields in an
	// unknown field's message, "unknown field (known: a, b)"; "" means
	// "known".
	KnownLabel string
	// Resolve, when not nil, maps each key and value node of a mapping
	// before it is used (following an alias, counting a node budget);
	// a nil result stops the walk of that mapping.
	Resolve func(*yaml.Node) *yaml.Node
	// Kind, when not nil, describes a node that is not a mapping; the
	// default is [KindName].
	Kind func(*yaml.Node) string
	// Merge, when not nil, is called with the value of each "<<" merge
	// key (a mapping, an alias or a list of them) instead of walking it
	// as a field; when nil, "<<" is a field like any other.
	Merge func(val *yaml.Node)
}

// Errorf records a problem at n (nil: no place) in field.
func (w *Walker) Errorf(n *yaml.Node, field, format string, args ...any) {
	e := &FieldError{File: w.File, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	w.Errs = append(w.Errs, e)
}

// Fields walks the mapping n at path, calling each's function for every
// key; a node that is not a mapping, unknown keys and keys given twice
// are recorded as errors. Fields reads w's Resolve, Kind and Merge once,
// when it starts, so a FieldFunc may change them to walk a nested mapping.
func (w *Walker) Fields(n *yaml.Node, path string, each map[string]FieldFunc) {
	resolve, merge := w.Resolve, w.Merge
	if n.Kind != yaml.MappingNode {
		kind := w.Kind
		if kind == nil {
			kind = KindName
		}
		w.Errorf(n, path, "want a mapping, got %s", kind(n))
		return
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if resolve != nil {
			if k, v = resolve(k), resolve(v); k == nil || v == nil {
				return
			}
		}
		if merge != nil && k.Tag == "!!merge" {
			merge(v)
			continue
		}
		field := JoinField(path, k.Value)
		if seen[k.Value] {
			w.Errorf(k, field, "given twice")
			continue
		}
		seen[k.Value] = true
		f, ok := each[k.Value]
		if !ok {
			label := w.KnownLabel
			if label == "" {
				label = "known"
			}
			hint := ""
			if c, ok := suggest.Closest(k.Value, slices.Sorted(maps.Keys(each))); ok {
				hint = fmt.Sprintf(", did you mean %q?", c)
			}
			w.Errorf(k, field, "unknown field%s (%s: %s)", hint, label, KnownFields(each))
			continue
		}
		f(k, v, field)
	}
}

// JoinField appends name to the field path path.
func JoinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// KnownFields lists m's keys, sorted, separated by ", ".
func KnownFields(m map[string]FieldFunc) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// KindName describes a node for a "want …, got …" message: "a mapping",
// "a list", a scalar's quoted value, "an alias" or "nothing".
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}
