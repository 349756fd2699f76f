package rls

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEnvoyRatelimitSuite runs envoy ratelimit's own test configurations
// through tollgate's loader and compares verdicts (loads or refused) with
// envoy's, read from its test/config/config_test.go: a test that calls
// expectConfigPanic expects the files it loads to be refused, any other
// expects them to load. Its integration and example config directories
// must load. Set TOLLGATE_ENVOY_RATELIMIT to a checkout of
// github.com/envoyproxy/ratelimit; without it the test skips. The
// differences README.md lists are allowed, with their reasons below.
func TestEnvoyRatelimitSuite(t *testing.T) {
	root := os.Getenv("TOLLGATE_ENVOY_RATELIMIT")
	if root == "" {
		t.Skip("set TOLLGATE_ENVOY_RATELIMIT to a checkout of envoyproxy/ratelimit")
	}
	// Differences kept on purpose (README: "What differs from envoy
	// ratelimit"): none today.
	allowed := map[string]string{}
	src, err := os.ReadFile(filepath.Join(root, "test/config/config_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	loadFile := regexp.MustCompile(`loadFile\("([^"]+)"\)`)
	merge := regexp.MustCompile(`\),\s*true\)`)
	compared := 0
	for _, block := range strings.Split(string(src), "\nfunc ")[1:] {
		name, _, _ := strings.Cut(block, "(")
		var files []File
		for _, m := range loadFile.FindAllStringSubmatch(block, -1) {
			data, err := os.ReadFile(filepath.Join(root, "test/config", m[1]))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, File{Name: m[1], Data: data})
		}
		if len(files) == 0 {
			continue
		}
		envoyRefuses := strings.Contains(block, "expectConfigPanic")
		_, err := Parse(files, LoadOptions{MergeDomains: merge.MatchString(block)})
		compared++
		if (err != nil) != envoyRefuses {
			if why, ok := allowed[name]; ok {
				t.Logf("%s: differs on purpose: %s", name, why)
				continue
			}
			t.Errorf("%s: envoy ratelimit refuses=%v, tollgate: %v", name, envoyRefuses, err)
		}
	}
	for _, dir := range []string{"test/integration/runtime/current/ratelimit/config", "examples/ratelimit/config"} {
		compared++
		if _, err := Load(filepath.Join(root, dir), LoadOptions{}); err != nil {
			t.Errorf("%s: envoy ratelimit loads it, tollgate: %v", dir, err)
		}
	}
	t.Logf("%d verdicts compared", compared)
	if compared < 20 {
		t.Errorf("only %d verdicts compared: did config_test.go change shape?", compared)
	}
}
