// Package examples holds complete programs, one per directory, that the
// documentation (README.md and docs/) quotes. This file checks that the
// quotes match the programs.
package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/docpages"
)

// quoteRE matches a quote marker and the fenced block after it.
var quoteRE = regexp.MustCompile("(?s)<!-- quote: ([^ ]+) -->\n```go\n(.*?)```\n")

// Every program under examples/ is quoted in a documentation page, and
// every quote is the program's file byte for byte.
func TestDocsQuoteThePrograms(t *testing.T) {
	pages, err := docpages.Load("..")
	if err != nil {
		t.Fatal(err)
	}
	quoted := map[string]bool{}
	for _, page := range pages {
		quoteMatches(t, page, quoted)
	}
	programs, err := filepath.Glob("*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(programs) == 0 {
		t.Fatal("no programs found under examples/")
	}
	for _, p := range programs {
		if path := "examples/" + filepath.ToSlash(p); !quoted[path] {
			t.Errorf("%s is not quoted in any page (add <!-- quote: %s --> before a ```go block)", path, path)
		}
	}
}

// quoteMatches checks the quotes of one page against the files, marking
// each quoted path in quoted.
func quoteMatches(t *testing.T, page docpages.Page, quoted map[string]bool) {
	t.Helper()
	readme := []byte(page.Text)
	for _, m := range quoteRE.FindAllStringSubmatch(string(readme), -1) {
		path, text := m[1], m[2]
		quoted[path] = true
		src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("%s quotes %s: %v", page.Name, path, err)
			continue
		}
		if text != string(src) {
			t.Errorf("%s's quote of %s differs from the file; copy the file into the page again", page.Name, path)
		}
	}
	if n := strings.Count(string(readme), "<!-- quote: "); n != len(quoteRE.FindAllString(string(readme), -1)) {
		t.Errorf("%s has %d quote markers but only %d are followed by a ```go block", page.Name, n, len(quoteRE.FindAllString(string(readme), -1)))
	}
}
