package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/docpages"
)

// demoStep is one curl command of the README's "Try it" block and the
// answer the README promises for it (the comment lines that follow it).
type demoStep struct {
	path    string // the URL's path
	body    string // the -d data
	promise []string
}

var curlLine = regexp.MustCompile(`^curl -s(i?) localhost:8080(/\S*) -d '([^']*)'$`)

// readmeDemo parses the first sh block under "## Try it" in README.md.
func readmeDemo(t *testing.T) []demoStep {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Try it\n")
	if !ok {
		t.Fatal("README.md has no \"## Try it\" section")
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("the Try it section has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	// A promise is the run of comment lines right after a curl command.
	var steps []demoStep
	inPromise := false
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "curl "):
			m := curlLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("README curl command not in the form this test runs: %s", line)
			}
			steps = append(steps, demoStep{path: m[2], body: m[3]})
			inPromise = true
		case inPromise && strings.HasPrefix(line, "# "):
			if p := strings.TrimPrefix(line, "# "); p != "…" {
				steps[len(steps)-1].promise = append(steps[len(steps)-1].promise, p)
			}
		default:
			inPromise = false
		}
	}
	return steps
}

// varying masks what depends on when the request is made: how many tokens
// have refilled and how long until the rest do.
var varying = regexp.MustCompile(`("remaining"|"retry_after_ms"|"reset_after_ms"):\d+|;r=\d+;t=\d+|^\d+$`)

// TestReadmeDemoShowsWhatItPromises runs the README's demo requests against
// a real `tollgate serve`, pasted as one block (no pause) and typed by hand
// (4 s between commands), and checks each answer against the one the
// README prints.
func TestReadmeDemoShowsWhatItPromises(t *testing.T) {
	t.Parallel() // its own servers
	steps := readmeDemo(t)
	if len(steps) < 2 {
		t.Fatalf("README demo has %d curl commands, want at least 2", len(steps))
	}
	for _, tc := range []struct {
		name  string
		pause time.Duration
	}{{"pasted", 0}, {"typed", 4 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			for i, st := range steps {
				if i > 0 {
					time.Sleep(tc.pause)
				}
				// What curl -d sends.
				resp, err := http.Post("http://"+s.addr+st.path, "application/x-www-form-urlencoded", strings.NewReader(st.body))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				checkPromise(t, i, st, resp, strings.TrimSpace(string(body)))
			}
		})
	}
}

func checkPromise(t *testing.T, i int, st demoStep, resp *http.Response, body string) {
	t.Helper()
	if len(st.promise) == 0 {
		t.Fatalf("README curl command %d promises no answer", i+1)
	}
	status := 200
	for _, p := range st.promise {
		switch {
		case strings.HasPrefix(p, "HTTP/"):
			f := strings.Fields(p)
			status, _ = strconv.Atoi(f[1])
		case strings.HasPrefix(p, "{"):
			if got, want := varying.ReplaceAllString(body, "$1"), varying.ReplaceAllString(p, "$1"); got != want {
				t.Errorf("command %d: body\n%s\nthe README promises\n%s", i+1, body, p)
			}
		default: // a header line
			name, value, ok := strings.Cut(p, ": ")
			if !ok {
				t.Fatalf("README promise line %q is neither a status, a header nor a body", p)
			}
			got := resp.Header.Get(name)
			if got == "" || varying.ReplaceAllString(got, "") != varying.ReplaceAllString(value, "") {
				t.Errorf("command %d: header %s is %q; the README promises %q", i+1, name, got, value)
			}
		}
	}
	if resp.StatusCode != status {
		t.Errorf("command %d: status %d, the README promises %d (%s)", i+1, resp.StatusCode, status, body)
	}
	if status == 429 {
		// The wait it names is real: more than the pause, at most the refill of the whole bucket.
		if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 20 {
			t.Errorf("command %d: Retry-After %q", i+1, resp.Header.Get("Retry-After"))
		}
	}
}

// TestReadmeNeverSpeaksOfTheSeed: users never saw the seed document; the
// README and BENCHMARKS.md describe policies for what they are. (--seed, the random seed,
// is fine.)
func TestReadmeNeverSpeaksOfTheSeed(t *testing.T) {
	for _, name := range []string{"README.md", "BENCHMARKS.md"} {
		b, err := os.ReadFile("../../" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?i)\bthe seed\b|seed's|seed[ -](jitter|schedule|backoff|policy)`).FindAllString(string(b), -1) {
			t.Errorf("%s speaks of %q", name, m)
		}
	}
}

// TestReadmeConfigExampleNeedsNoRedis: the README's main config example is
// valid and keeps bucket state in memory, so a user who copies it on a
// machine without Redis gets a server that throttles (issue 9, D1); the
// Redis store has its own snippet, which must be valid too.
func TestReadmeConfigExampleNeedsNoRedis(t *testing.T) {
	yamlBlock := func(heading string) string {
		_, block, ok := strings.Cut(docSection(t, heading), "```yaml\n")
		if !ok {
			t.Fatalf("section %q has no yaml block", heading)
		}
		block, _, _ = strings.Cut(block, "```")
		return block
	}
	// The example's autoscaled service runs ./hello, relative to the
	// config file. As the README says, check refuses the file until
	// there is one, naming the command; then the file passes check.
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/my-quotas.yaml", []byte(yamlBlock("Config")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCmd("check", dir+"/my-quotas.yaml"); code != 1 || !strings.Contains(errs, `"./hello" cannot be run`) {
		t.Fatalf("check of the README's config without ./hello: exit %d, %s", code, errs)
	}
	if err := os.WriteFile(dir+"/hello", []byte("#!/bin/sh\n"), 0o755); err != nil { // what go build -o hello makes, as far as check sees
		t.Fatal(err)
	}
	if code, _, errs := runCmd("check", dir+"/my-quotas.yaml"); code != 0 {
		t.Fatalf("check of the README's config example: exit %d, %s", code, errs)
	}
	c, err := config.Load(context.Background(), dir+"/my-quotas.yaml")
	if err != nil {
		t.Fatalf("the README's config example does not load: %v", err)
	}
	if st := c.Store; st.URL != "" {
		t.Errorf("the README's main config example points at a store (%+v); keep Redis out of it", st)
	}
	redisBlock := "services:\n  - preset: ecs\n" + yamlBlock("Many nodes, one quota: Redis")
	c, err = config.Parse("README.md#redis", []byte(redisBlock))
	if err != nil {
		t.Fatalf("the README's store snippet does not parse: %v", err)
	}
	if st := c.Store; st.URL == "" || st.OnFailure != "local" {
		t.Errorf("the README's store snippet gives %+v; want a URL and the default policy, local", st)
	}
}

// TestEveryDocConfigPassesCheck runs every yaml block of README.md and
// docs/*.md through `tollgate check`, as a user who copies it would: a
// fragment (a store or rls section alone) goes under the ECS preset, and
// the files the configs name (./hello, an rls.config_dir) exist beside it.
// Envoy's own configuration is the one block that is not tollgate's.
func TestEveryDocConfigPassesCheck(t *testing.T) {
	pages, err := docpages.Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range pages {
		checked += checkPageConfigs(t, p)
	}
	if checked < 5 {
		t.Fatalf("checked %d yaml blocks of the documentation; it has at least 5 configs", checked)
	}
}

// checkPageConfigs checks one page's yaml blocks and returns how many.
func checkPageConfigs(t *testing.T, page docpages.Page) int {
	t.Helper()
	heading, checked := "", 0
	lines := strings.Split(page.Text, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") || strings.HasPrefix(lines[i], "# ") {
			heading = lines[i]
		}
		if lines[i] != "```yaml" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		block := strings.Join(lines[start:i], "\n") + "\n"
		where := fmt.Sprintf("%s:%d (%s)", page.Name, start, heading)
		if strings.Contains(block, "http_filters:") {
			continue // Envoy's side of the RLS setup
		}
		if !regexp.MustCompile(`(?m)^services:`).MatchString(block) {
			block = "services:\n  - preset: ecs\n" + block
		}
		dir := t.TempDir()
		files := map[string]string{
			"config.yaml":                 block,
			"hello":                       "#!/bin/sh\n",
			"ratelimit/config/rules.yaml": "domain: readme\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 10}\n",
		}
		for name, body := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if code, _, errs := runCmd("check", filepath.Join(dir, "config.yaml")); code != 0 {
			t.Errorf("%s: tollgate check exits %d:\n%s\n%s", where, code, errs, block)
		}
		checked++
	}
	return checked
}

// docSection returns the text of the documentation section under heading,
// on whichever page (README.md, docs/*.md) holds it.
func docSection(t *testing.T, heading string) string {
	t.Helper()
	pages, err := docpages.Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := docpages.Section(pages, heading)
	if !ok {
		t.Fatalf("no documentation page has a %q section", heading)
	}
	return text
}
