// Package examples holds complete programs, one per directory, that the
// README quotes. This file checks that the quotes match the programs.
package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// quoteRE matches a quote marker and the fenced block after it.
var quoteRE = regexp.MustCompile("(?s)<!-- quote: ([^ ]+) -->\n```go\n(.*?)```\n")

// Every program under examples/ is quoted in the README, and every quote
// is the program's file byte for byte.
func TestREADMEQuotesThePrograms(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	quoted := map[string]bool{}
	for _, m := range quoteRE.FindAllStringSubmatch(string(readme), -1) {
		path, text := m[1], m[2]
		quoted[path] = true
		src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("README quotes %s: %v", path, err)
			continue
		}
		if text != string(src) {
			t.Errorf("README's quote of %s differs from the file; copy the file into the README again", path)
		}
	}
	if n := strings.Count(string(readme), "<!-- quote: "); n != len(quoteRE.FindAllString(string(readme), -1)) {
		t.Errorf("README has %d quote markers but only %d are followed by a ```go block", n, len(quoted))
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
			t.Errorf("%s is not quoted in the README (add <!-- quote: %s --> before a ```go block)", path, path)
		}
	}
}
