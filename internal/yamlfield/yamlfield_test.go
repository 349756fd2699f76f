package yamlfield

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestWalker checks every message the walker writes itself, and that the
// errors match ErrInvalidConfig and unwrap to FieldErrors.
func TestWalker(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		w          Walker
		want       string
	}{
		{"twice", "a: 1\na: 2\n", Walker{File: "f"}, "f:2:1: a: given twice"},
		{"unknown", "b: 1\n", Walker{File: "f"}, "f:1:1: b: unknown field (known: a)"},
		{"label", "b: 1\n", Walker{File: "f", KnownLabel: "known here"}, "f:1:1: b: unknown field (known here: a)"},
		{"not a mapping", "[1]\n", Walker{File: "f"}, "f:1:1: want a mapping, got a list"},
		{"kind", "x\n", Walker{File: "f", Kind: func(*yaml.Node) string { return "K" }}, "f:1:1: want a mapping, got K"},
		{"resolve stops", "a: 1\nb: 2\n", Walker{File: "f", Resolve: func(*yaml.Node) *yaml.Node { return nil }}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, ferr := DecodeOne("f", []byte(tc.data))
			if ferr != nil {
				t.Fatal(ferr)
			}
			w := tc.w
			w.Fields(root, "", map[string]FieldFunc{"a": func(_, _ *yaml.Node, _ string) {}})
			if tc.want == "" {
				if len(w.Errs) != 0 {
					t.Fatalf("errors %v, want none", w.Errs)
				}
				return
			}
			if got := w.Errs.Error(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			var err error = w.Errs
			var fe *FieldError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &fe) {
				t.Errorf("%v: errors.Is ErrInvalidConfig or errors.As *FieldError fails", err)
			}
		})
	}
}

// TestDecodeOne: a syntax error carries its line, a second document is
// refused, and an empty file is a nil root without error.
func TestDecodeOne(t *testing.T) {
	if root, ferr := DecodeOne("f", nil); root != nil || ferr != nil {
		t.Errorf("empty file: %v, %v; want nil, nil", root, ferr)
	}
	if _, ferr := DecodeOne("f", []byte("a: 1\n---\nb: 2\n")); ferr == nil || ferr.Error() != "f:2: a second YAML document: a config file holds one" {
		t.Errorf("second document: %v", ferr)
	}
	if _, ferr := DecodeOne("f", []byte("a: [1\nb: 2\n")); ferr == nil || ferr.Line == 0 {
		t.Errorf("syntax error %v has no line", ferr)
	}
}

// TestSyntaxErrorNamesTheBreakingLine: the parser names the line where
// the list or mapping began; the error names the line that breaks it,
// at its first non-blank character.
func TestSyntaxErrorNamesTheBreakingLine(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{"services:\n  - name: a\n   name: x\n", "f:3:4: did not find expected '-' indicator"},
		{"a: 1\nb: 2\n c: 3\nd: 4\n", "f:3:2: mapping values are not allowed in this context"},
		{"a:\n  b: 1\n  c: 2\n d: 3\n", "f:4:2: did not find expected key"},
		{"a:\n\tb: 1\n", "f:2:1: found character that cannot start any token"},
	} {
		_, ferr := DecodeOne("f", []byte(tc.data))
		if ferr == nil || ferr.Error() != tc.want {
			t.Errorf("%q: got %v, want %s", tc.data, ferr, tc.want)
		}
	}
}

// TestMergeIsReadOnce: a "<<" key goes to Merge, not to the fields, and a
// FieldFunc that walks a nested mapping with another Merge does not change
// the outer walk's.
func TestMergeIsReadOnce(t *testing.T) {
	root, ferr := DecodeOne("f", []byte("base: &b {x: 1}\nin: {<<: *b}\n<<: *b\n"))
	if ferr != nil {
		t.Fatal(ferr)
	}
	var got []string
	w := Walker{File: "f"}
	w.Merge = func(*yaml.Node) { got = append(got, "outer") }
	w.Fields(root, "", map[string]FieldFunc{
		"base": func(_, _ *yaml.Node, _ string) {},
		"in": func(_, v *yaml.Node, f string) {
			w.Merge = func(*yaml.Node) { got = append(got, "inner") }
			w.Fields(v, f, map[string]FieldFunc{})
		},
	})
	if len(w.Errs) != 0 {
		t.Errorf("errors %v, want none", w.Errs)
	}
	if want := "inner outer"; strings.Join(got, " ") != want {
		t.Errorf("merges %q, want %q", got, want)
	}
}
