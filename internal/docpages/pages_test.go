package docpages

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// maxPageBytes bounds a documentation page: one a reader can find things in.
const maxPageBytes = 25 << 10

// linkRE matches a Markdown link or image target.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestPagesAreShortAndLinked: every page is at most 25 KB, the README's
// first screen carries the map, and every relative link names a file that
// exists and, with a #fragment, a heading of that file.
func TestPagesAreShortAndLinked(t *testing.T) {
	pages, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("%d pages; want README.md and the docs/ pages", len(pages))
	}
	anchors := map[string]map[string]bool{}
	for _, p := range pages {
		anchors[p.Name] = headingAnchors(p.Text)
	}
	for _, p := range pages {
		if len(p.Text) > maxPageBytes {
			t.Errorf("%s is %d bytes; split it (at most %d)", p.Name, len(p.Text), maxPageBytes)
		}
		for _, m := range linkRE.FindAllStringSubmatch(p.Text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			name := p.Name
			if file != "" {
				name = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.Name), file)))
				if _, err := os.Stat(filepath.Join("../..", name)); err != nil {
					t.Errorf("%s links to %s: %v", p.Name, target, err)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(name, ".md") && anchors[name] != nil && !anchors[name][frag] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", p.Name, target, name)
			}
		}
	}
	readme := pages[0].Text
	firstScreen := strings.Join(strings.SplitN(readme, "\n", 50)[:49], "\n")
	if !strings.Contains(firstScreen, "go test ./...") || !strings.Contains(firstScreen, "## Map") {
		t.Errorf("README's first 50 lines lack the test command or the map")
	}
	for _, p := range pages[1:] {
		if !strings.Contains(readme, "("+p.Name) {
			t.Errorf("README's map does not link %s", p.Name)
		}
	}
}

// headingAnchors returns the GitHub anchors of a page's headings.
func headingAnchors(text string) map[string]bool {
	a := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a[b.String()] = true
	}
	return a
}
