package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/docpages"
)

// docFlagRE matches a flag in a command line of the documentation.
var docFlagRE = regexp.MustCompile(`(?:^|\s)--?([a-z][a-z0-9-]*)`)

// usageFlagRE matches a flag in a command's --help.
var usageFlagRE = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)

// TestEveryDocCommandIsReal: every `tollgate …` command line in a shell
// block of README.md or docs/*.md names a command tollgate has and only
// flags that command defines, so a page cannot drift from the binary. The
// commands that the pages show with their output are run by the tests of
// their sections (the README's demo, replay's commands, the configs).
func TestEveryDocCommandIsReal(t *testing.T) {
	pages, err := docpages.Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]map[string]bool{}
	flagsOf := func(cmd string) map[string]bool {
		if f, ok := flags[cmd]; ok {
			return f
		}
		code, out, errs := runCmd(cmd, "--help")
		f := map[string]bool{"help": true, "h": true}
		if code != 0 {
			f = nil
		} else {
			for _, m := range usageFlagRE.FindAllStringSubmatch(out+errs, -1) {
				f[m[1]] = true
			}
		}
		flags[cmd] = f
		return f
	}
	checked := 0
	for _, p := range pages {
		inShell := false
		for i, line := range strings.Split(p.Text, "\n") {
			switch {
			case strings.HasPrefix(line, "```sh") || strings.HasPrefix(line, "```bash"):
				inShell = true
				continue
			case strings.HasPrefix(line, "```"):
				inShell = false
				continue
			}
			if !inShell {
				continue
			}
			_, cmdline, ok := strings.Cut(" "+line, " tollgate ")
			if !ok || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			cmdline, _, _ = strings.Cut(cmdline, " #")
			for _, sep := range []string{" &", " |", ";", ")"} {
				cmdline, _, _ = strings.Cut(cmdline, sep)
			}
			fields := strings.Fields(cmdline)
			if len(fields) == 0 || fields[0] == "instance-supervisor" {
				continue
			}
			where := p.Name + ":" + strconv.Itoa(i+1)
			f := flagsOf(fields[0])
			if f == nil {
				t.Errorf("%s: tollgate has no command %q: %s", where, fields[0], line)
				continue
			}
			for _, m := range docFlagRE.FindAllStringSubmatch(" "+strings.Join(fields[1:], " "), -1) {
				name, _, _ := strings.Cut(m[1], "=")
				if !f[name] {
					t.Errorf("%s: tollgate %s has no flag -%s: %s", where, fields[0], name, line)
				}
			}
			checked++
		}
	}
	t.Logf("%d command lines checked", checked)
	if checked < 10 {
		t.Fatalf("checked %d tollgate command lines in the documentation; it has more", checked)
	}
}
