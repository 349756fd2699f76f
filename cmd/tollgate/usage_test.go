package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelpGoesToStdoutWithExitZero: every command answers --help and -h
// the same way: its usage and flags on stdout, nothing on stderr, exit 0.
func TestHelpGoesToStdoutWithExitZero(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"usage: tollgate <command>", "serve", "check", "sim", "version"}},
		{[]string{"-h"}, []string{"usage: tollgate <command>"}},
		{[]string{"help"}, []string{"usage: tollgate <command>"}},
		{[]string{"help", "serve"}, []string{"usage: tollgate serve [flags]", "-store-timeout"}},
		{[]string{"serve", "--help"}, []string{"usage: tollgate serve [flags]", "-listen", "-store", "-log-level", "(default info)", "(default 10s)"}},
		{[]string{"serve", "-h"}, []string{"usage: tollgate serve [flags]"}},
		{[]string{"check", "--help"}, []string{"usage: tollgate check [--rls-config DIR] FILE", "-preset", "-rls-config"}},
		{[]string{"sim", "--help"}, []string{"usage: tollgate sim", "-scenario", "-preset"}},
		{[]string{"version", "--help"}, []string{"usage: tollgate version"}},
	} {
		code, out, errs := runCmd(tc.args...)
		if code != 0 || errs != "" {
			t.Errorf("%v: exit %d, stderr %q; want 0 and nothing on stderr", tc.args, code, errs)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: stdout lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
}

// TestUsageErrorsExitTwoNamingTheChoices: a bad flag value exits 2 with a
// message that names what would have been valid.
func TestUsageErrorsExitTwoNamingTheChoices(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--store", "memroy"}, []string{`invalid value "memroy" for flag --store`, "want memory, or a Redis URL", "redis, rediss, unix, redis+cluster, rediss+cluster, redis+sentinel, rediss+sentinel", "usage: tollgate serve [flags]", "run 'tollgate serve --help' for the flags"}},
		{[]string{"serve", "--store", "etcd://x"}, []string{"want memory, or a Redis URL"}},
		{[]string{"serve", "--store-timeout", "50"}, []string{`invalid value "50" for flag --store-timeout`, "needs a unit, e.g. 50ms"}},
		{[]string{"serve", "--shutdown-timeout", "soon"}, []string{`"soon" is not a duration`, "e.g. 50ms, 2s"}},
		{[]string{"serve", "--log-level", "loud"}, []string{`"loud" is not one of: debug, info, warn, error`}},
		{[]string{"serve", "--log-format", "xml"}, []string{`"xml" is not one of: text, json`}},
		{[]string{"serve", "--store-on-failure", "bogus"}, []string{`invalid value "bogus" for flag --store-on-failure`, "local, open, closed"}},
		{[]string{"serve", "--max-batch", "lots"}, []string{`invalid value "lots" for flag --max-batch: want a whole number, e.g. 1000`}},
		{[]string{"serve", "--max-body", "99999999999999999999"}, []string{"for flag --max-body: out of range: want a whole number"}},
		{[]string{"serve", "--deny-cache=maybe"}, []string{`invalid boolean value "maybe" for --deny-cache: want true or false`}},
		{[]string{"sim", "--preset", "thundering-herd", "--seed", "-1"}, []string{`for flag --seed: want a whole number of 0 or more`}},
		{[]string{"serve", "--nope"}, []string{"flag provided but not defined: --nope\n"}},
		{[]string{"serve", "--config-file", "x.yaml"}, []string{"flag provided but not defined: --config-file (did you mean --config?)"}},
		{[]string{"serve", "--lisen", ":0"}, []string{"flag provided but not defined: --lisen (did you mean --listen?)"}},
		{[]string{"serve", "--drain=1s"}, []string{"flag provided but not defined: --drain (did you mean --drain-delay?)"}},
		{[]string{"check", "--presets", "ecs"}, []string{"(did you mean --preset?)"}},
		// (The trailing argument stops serve if the address were taken.)
		{[]string{"serve", "--listen", "20604", "extra"}, []string{`invalid value "20604" for flag --listen: "20604" is a port without a host: want 127.0.0.1:20604 (this machine only) or :20604 (every interface)`}},
		{[]string{"serve", "--grpc-listen", "8081", "extra"}, []string{"want 127.0.0.1:8081 (this machine only) or :8081"}},
		{[]string{"serve", "--listen", "localhost", "extra"}, []string{`"localhost" is not HOST:PORT (missing port in address): e.g. 127.0.0.1:8080`}},
		{[]string{"serve", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"check"}, []string{"give a config FILE, or --preset NAME (", "ecs"}},
		{[]string{"check", "--preset", "nope"}, []string{"nope", "ecs", "cloudmap"}},
		{[]string{"check", "--preset", "ecss"}, []string{`unknown preset "ecss" (did you mean "ecs"?) (have cloudmap, ec2, ecs, kms, secretsmanager, servicequotas, ssm, sts)`}},
		{[]string{"sim", "--preset", "thundering_herd"}, []string{`unknown preset "thundering_herd" (did you mean "thundering-herd"?)`}},
		{[]string{"sim"}, []string{"give one of --scenario FILE or --preset NAME (", "thundering-herd"}},
		{[]string{"sim", "--preset", "thundering-herd", "--format", "gif"}, []string{"want png, svg or html"}},
		{[]string{"version", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "serve", "version"}},
		{nil, []string{"usage: tollgate <command>"}},
	} {
		code, out, errs := runCmd(tc.args...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing on stdout", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, errs)
			}
		}
	}
}

func TestVersionText(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/tollgate/tollgate", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	want := "tollgate v1.4.0\nmodule   github.com/tollgate/tollgate\nrevision 0123456789abcdef0123456789abcdef01234567 (modified)\ncommit   2026-11-30T12:00:00Z\ngo       go1.26.8\n"
	if got := versionText(info); got != want {
		t.Errorf("versionText:\n%s\nwant:\n%s", got, want)
	}
	info.Settings = nil
	info.Main.Version = ""
	if got := versionText(info); !strings.Contains(got, "tollgate (devel)\n") || !strings.Contains(got, "revision unknown") {
		t.Errorf("without VCS information:\n%s", got)
	}
}

// TestDashDashVersion: tollgate --version (and -version, -v) prints what
// tollgate version prints.
func TestDashDashVersion(t *testing.T) {
	_, want, _ := runCmd("version")
	for _, flag := range []string{"--version", "-version", "-v"} {
		code, out, errs := runCmd(flag)
		if code != 0 || errs != "" || out != want || !strings.HasPrefix(out, "tollgate ") {
			t.Errorf("tollgate %s: exit %d, stdout %q, stderr %q; want 0 and %q", flag, code, out, errs, want)
		}
	}
}

// TestVersionReportsTheRevisionItWasBuiltFrom builds the binary with VCS
// stamping in a git checkout and checks `tollgate version` names HEAD.
func TestVersionReportsTheRevisionItWasBuiltFrom(t *testing.T) {
	t.Parallel() // a go build of its own: with the other slow tests, not before them
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout (or no git): %v", err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	// The go command stamps only when .git is a directory: not in a
	// `git worktree` checkout, where it is a file.
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("in a git worktree (.git is a file): the go command does not stamp VCS information there")
	}
	bin := t.TempDir() + "/tollgate"
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("tollgate version: %v", err)
	}
	// The version is "(devel)" or, from Go 1.24, a pseudo-version naming
	// the revision.
	for _, w := range []string{"tollgate ", "module   github.com/tollgate/tollgate\n", "revision " + strings.TrimSpace(string(head)), "go       go1."} {
		if !strings.Contains(string(out), w) {
			t.Errorf("tollgate version lacks %q:\n%s", w, out)
		}
	}
}

// A Redis URL missing a slash is called malformed, with the form it
// should have; go-redis's own error ("invalid database number:
// \"localhost\"") read the host as a database.
func TestServeExplainsAMalformedStoreURL(t *testing.T) {
	code, _, errs := runCmd("serve", "--listen", "127.0.0.1:0", "--store", "rediss:/localhost")
	if want := "want rediss://host:port/db (e.g. rediss://127.0.0.1:6379/0)"; code != 1 || !strings.Contains(errs, "malformed URL") || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errs, want)
	}
}
