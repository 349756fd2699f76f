// Package docpages reads the project's documentation pages, README.md and
// docs/*.md, for the tests that run what the pages show: a section is found
// by its heading on whichever page it lives, so moving a section between
// pages never leaves its commands untested.
package docpages

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Page is one documentation file: its path relative to the repository
// root (README.md, docs/server.md) and its text.
type Page struct {
	Name string
	Text string
}

// Load reads README.md and every docs/*.md under root, README first, the
// rest by name.
func Load(root string) ([]Page, error) {
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, fmt.Errorf("listing docs: %w", err)
	}
	sort.Strings(names)
	names = append([]string{filepath.Join(root, "README.md")}, names...)
	pages := make([]Page, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("reading documentation: %w", err)
		}
		rel, err := filepath.Rel(root, n)
		if err != nil {
			return nil, fmt.Errorf("naming %s: %w", n, err)
		}
		pages = append(pages, Page{Name: filepath.ToSlash(rel), Text: string(b)})
	}
	return pages, nil
}

// Section finds the section whose heading (at level 1 or 2, "# " or
// "## ", without the hashes) is heading, on any page, and returns the
// page's name and the section's text after its heading line, up to the
// next heading of level 1 or 2 (a line in a fenced code block, such as a
// shell comment, is never a heading). ok is false when no page has it.
func Section(pages []Page, heading string) (page, text string, ok bool) {
	for _, p := range pages {
		lines := strings.SplitAfter(p.Text, "\n")
		for i, l := range lines {
			t := strings.TrimRight(l, "\n")
			if t != "# "+heading && t != "## "+heading {
				continue
			}
			var b strings.Builder
			inCode := false
			for _, l := range lines[i+1:] {
				if strings.HasPrefix(l, "```") {
					inCode = !inCode
				}
				if !inCode && (strings.HasPrefix(l, "# ") || strings.HasPrefix(l, "## ")) {
					break
				}
				b.WriteString(l)
			}
			return p.Name, b.String(), true
		}
	}
	return "", "", false
}
