package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tollgate/tollgate/internal/certtest"
)

// TestCheckReadsWithServesBounds: check reads a config file with the same
// bounds as serve, so an endless file (/dev/zero, which used to grow
// check to gigabytes) is refused at the size bound, and a FIFO without a
// writer (which used to block) ends at once as an empty file.
func TestCheckReadsWithServesBounds(t *testing.T) {
	code, _, errs := runCmd("check", "/dev/zero")
	if code != 1 || !strings.Contains(errs, "config /dev/zero is too large: more than the 4 MiB allowed") {
		t.Fatalf("check /dev/zero: exit %d, %s", code, errs)
	}
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	code, _, errs = runCmd("check", fifo)
	if code != 1 || !strings.Contains(errs, "the file is empty") {
		t.Fatalf("check FIFO: exit %d, %s", code, errs)
	}
}

// TestCheckValidatesTheRLSDirectory: check loads the directory the
// config's rls.config_dir names, as serve does (a broken file there used
// to pass check and fail serve), and --rls-config checks a directory on
// its own or in place of the config's.
func TestCheckValidatesTheRLSDirectory(t *testing.T) {
	dir := t.TempDir()
	rl := filepath.Join(dir, "ratelimit")
	os.Mkdir(rl, 0o755)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write("tollgate.yaml", "services:\n  - preset: ecs\nrls:\n  config_dir: ratelimit\n")
	write("ratelimit/edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	if code, out, errs := runCmd("check", cfg); code != 0 || !strings.Contains(out, "1 domains, 1 rules, 1 files") {
		t.Fatalf("good rls directory: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runCmd("check", "--rls-config", rl); code != 0 || !strings.Contains(out, "1 rules") {
		t.Fatalf("--rls-config alone: exit %d\n%s%s", code, out, errs)
	}
	write("ratelimit/edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: lightyear, requests_per_unit: 2}\n")
	code, _, errs := runCmd("check", cfg)
	if code != 1 || !strings.Contains(errs, "rls.config_dir") || !strings.Contains(errs, "edge.yaml:4:") {
		t.Fatalf("broken file in rls.config_dir: exit %d, %s", code, errs)
	}
	if code, _, errs := runCmd("check", "--rls-config", rl); code != 1 || !strings.Contains(errs, "edge.yaml:4:") {
		t.Fatalf("--rls-config of a broken directory: exit %d, %s", code, errs)
	}
}

// TestCheckAppliesTheStoresWindow: a limit the Redis store cannot hold
// (its empty bucket refills in more than redis.MaxWindow) passes check
// with the memory store and fails it when the file's store is Redis, as
// serve refuses it.
func TestCheckAppliesTheStoresWindow(t *testing.T) {
	dir := t.TempDir()
	slow := "services:\n  - name: slow\n    categories:\n      - {name: yearly, capacity: 1000, refill_per_second: 0.00001, actions: [Do]}\n"
	for _, tc := range []struct {
		store string
		code  int
	}{{"", 0}, {"store: {url: memory}\n", 0}, {"store: {url: redis://127.0.0.1:1/0}\n", 1}} {
		path := dir + "/q.yaml"
		if err := os.WriteFile(path, []byte(tc.store+slow), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs := runCmd("check", path)
		if code != tc.code {
			t.Fatalf("check with %q: exit %d, want %d (%s)", tc.store, code, tc.code, errs)
		}
		if tc.code != 0 && !strings.Contains(errs, "service slow category yearly") {
			t.Fatalf("check with %q does not name the limit: %s", tc.store, errs)
		}
	}
}

// TestCheckReadsTheTLSFiles: check reads the certificate files rls.tls
// names as serve does: a missing one fails check, naming the field and
// the file; real ones (made by certtest) pass.
func TestCheckReadsTheTLSFiles(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "ratelimit")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rules, "r.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "q.yaml")
	write := func(cert, key string) {
		t.Helper()
		body := "services:\n  - preset: ecs\nrls:\n  config_dir: ratelimit\n  tls: {cert_file: " + cert + ", key_file: " + key + "}\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("missing.crt", "missing.key")
	if code, _, errs := runCmd("check", path); code != 1 || !strings.Contains(errs, "rls.tls") || !strings.Contains(errs, "missing.crt") {
		t.Fatalf("check with a missing certificate: exit %d, %s", code, errs)
	}
	certFile, keyFile := certtest.NewCA(t, "check CA").Issue("localhost").Write(t, dir, "tls")
	write(certFile, keyFile)
	if code, _, errs := runCmd("check", path); code != 0 {
		t.Fatalf("check with real certificate files: exit %d, %s", code, errs)
	}
}
