package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/suggest"
)

// Every subcommand parses its flags the same way: help (-h, --help) goes
// to stdout with exit status 0; a usage error names the problem, and the
// valid choices where there are some, on stderr with exit status 2.

// newFlagSet returns an empty flag set for a subcommand, to be parsed by
// parseFlags.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parseFlags reports errors and help itself
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args into fs. It returns ok when the command should
// go on; otherwise it has printed help (exit 0) or a usage error (exit 2)
// and returns the exit status. synopsis is the usage line(s) after
// "usage: ".
func parseFlags(fs *flag.FlagSet, synopsis string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, fs, synopsis)
		return 0, false
	}
	if err != nil {
		// The flag package names flags with one dash; the docs use two.
		msg := singleDashFlag.ReplaceAllString(explainParseError(fs, err.Error()), "$1--")
		if name, ok := strings.CutPrefix(err.Error(), undefinedFlag); ok {
			if c := nearestFlag(fs, strings.TrimLeft(name, "-")); c != "" {
				msg += " (did you mean --" + c + "?)"
			}
		}
		return usageError(stderr, fs.Name(), "%s", msg), false
	}
	return 0, true
}

// undefinedFlag begins the flag package's error for an unknown flag.
const undefinedFlag = "flag provided but not defined: "

// nearestFlag is the flag an unknown flag name was most likely meant to
// be: the nearest by spelling (suggest.Closest), else the one flag it
// lengthens or shortens at a dash (--config-file for --config, --drain
// for --drain-delay), or "".
func nearestFlag(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if c, ok := suggest.Closest(name, names); ok {
		return c
	}
	var longer, shorter []string
	for _, n := range names {
		switch {
		case strings.HasPrefix(name, n+"-"):
			longer = append(longer, n)
		case strings.HasPrefix(n, name+"-"):
			shorter = append(shorter, n)
		}
	}
	switch {
	case len(longer) > 0: // the longest flag it lengthens
		return slices.MaxFunc(longer, func(a, b string) int { return len(a) - len(b) })
	case len(shorter) == 1:
		return shorter[0]
	}
	return ""
}

// singleDashFlag finds the flag names in the flag package's errors.
var singleDashFlag = regexp.MustCompile(`(for flag |for |not defined: )-(?:-)?`)

// numericParseError finds the flag package's bare "parse error" and
// "value out of range" for a flag of its own number or bool types.
var numericParseError = regexp.MustCompile(`for (?:flag )?-(?:-)?([^:]+): (parse error|value out of range)$`)

// explainParseError replaces the flag package's "parse error" for a number
// or bool flag with what the flag takes.
func explainParseError(fs *flag.FlagSet, msg string) string {
	m := numericParseError.FindStringSubmatchIndex(msg)
	if m == nil {
		return msg
	}
	name := msg[m[2]:m[3]]
	fl := fs.Lookup(name)
	if fl == nil {
		return msg
	}
	g, ok := fl.Value.(flag.Getter)
	if !ok {
		return msg
	}
	var want string
	switch g.Get().(type) {
	case int, int64:
		want = "want a whole number, e.g. " + fl.DefValue
	case uint, uint64:
		want = "want a whole number of 0 or more, e.g. " + fl.DefValue
	case float64:
		want = "want a number, e.g. " + fl.DefValue
	case bool:
		want = "want true or false"
	default:
		return msg
	}
	if msg[m[4]:m[5]] == "value out of range" {
		want = "out of range: " + want
	}
	return msg[:m[4]] + want
}

// printUsage writes a subcommand's usage and flags to w.
func printUsage(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprintf(w, "usage: %s\n", synopsis)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// synopses are the usage lines of the commands, by name.
var synopses = map[string]string{
	"serve":   serveSynopsis,
	"check":   checkSynopsis,
	"sim":     simSynopsis,
	"replay":  replaySynopsis,
	"state":   stateSynopsis,
	"version": versionSynopsis,
}

// usageError prints a usage error of `tollgate name` to stderr, with the
// command's usage line and a pointer to its help, and returns exit status
// 2.
func usageError(stderr io.Writer, name, format string, args ...any) int {
	fmt.Fprintf(stderr, "tollgate %s: %s\n", name, fmt.Sprintf(format, args...))
	if syn, ok := synopses[name]; ok {
		line, _, _ := strings.Cut(syn, "\n")
		fmt.Fprintf(stderr, "usage: %s\n", line)
	}
	if name != "version" { // the one command without flags
		fmt.Fprintf(stderr, "run 'tollgate %s --help' for the flags\n", name)
	}
	return 2
}

// durationValue is a duration flag whose errors say what a duration looks
// like: a bare number has no unit.
type durationValue struct{ p *time.Duration }

func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(&durationValue{p}, name, usage)
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err == nil {
		*v.p = d
		return nil
	}
	if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
		return fmt.Errorf("%s needs a unit, e.g. %sms or %ss (units: ns, us, ms, s, m, h)", s, s, s)
	}
	return fmt.Errorf("%q is not a duration: want a number with a unit, e.g. 50ms, 2s or 1m30s", s)
}

func (v *durationValue) String() string {
	if v == nil || v.p == nil {
		return "0s"
	}
	return v.p.String()
}

// choiceValue is a string flag that takes one of a fixed list of words,
// case-insensitively; errors list them.
type choiceValue struct {
	p       *string
	choices []string
}

func choiceVar(fs *flag.FlagSet, p *string, name, def string, choices []string, usage string) {
	*p = def
	fs.Var(&choiceValue{p, choices}, name, usage)
}

func (v *choiceValue) Set(s string) error {
	if i := slices.Index(v.choices, strings.ToLower(s)); i >= 0 {
		*v.p = v.choices[i]
		return nil
	}
	return fmt.Errorf("%q is not one of: %s", s, strings.Join(v.choices, ", "))
}

func (v *choiceValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

// redisSchemes are the URL schemes the Redis store opens
// (limiter/redis.Open).
var redisSchemes = []string{"redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"}

// storeValue is the --store flag: memory, or a URL with a Redis scheme.
// The Redis store checks the rest of the URL when it opens it.
type storeValue struct{ p *string }

func (v *storeValue) Set(s string) error {
	if s == "memory" {
		*v.p = s
		return nil
	}
	if u, err := url.Parse(s); err == nil && slices.Contains(redisSchemes, u.Scheme) {
		*v.p = s
		return nil
	}
	return fmt.Errorf("%q: want memory, or a Redis URL with one of the schemes %s (e.g. redis://127.0.0.1:6379/0)", s, strings.Join(redisSchemes, ", "))
}

func (v *storeValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

// addrValue is a listen address flag, HOST:PORT; its errors say what one
// looks like, and a bare port gets the two addresses it may have meant.
type addrValue struct{ p *string }

func addrVar(fs *flag.FlagSet, p *string, name, def, usage string) {
	*p = def
	fs.Var(&addrValue{p}, name, usage)
}

func (v *addrValue) Set(s string) error {
	if s == "" { // the default: the config's, or the built-in address
		*v.p = s
		return nil
	}
	_, _, err := net.SplitHostPort(s)
	if err == nil {
		*v.p = s
		return nil
	}
	if _, perr := strconv.ParseUint(s, 10, 16); perr == nil {
		return fmt.Errorf("%q is a port without a host: want 127.0.0.1:%s (this machine only) or :%s (every interface)", s, s, s)
	}
	var ae *net.AddrError
	if errors.As(err, &ae) {
		err = errors.New(ae.Err) // AddrError repeats the address
	}
	return fmt.Errorf("%q is not HOST:PORT (%w): e.g. 127.0.0.1:8080, or :8080 for every interface", s, err)
}

func (v *addrValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

// optBool is a boolean flag that remembers whether it was given, so that
// a flag left out defers to the config file and a flag given wins over it.
type optBool struct{ set, v bool }

func (b *optBool) String() string { return strconv.FormatBool(b.v) }

// Set parses the flag's value, as flag.Bool does.
func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.v = true, v
	return nil
}

// IsBoolFlag lets the flag stand alone (--rls-shadow-mode).
func (b *optBool) IsBoolFlag() bool { return true }

// ptr returns the flag's value if it was given, else nil (the config
// file decides).
func (b optBool) ptr() *bool {
	if b.set {
		return &b.v
	}
	return nil
}

// dataDirValue is --data-dir: a directory, or "" for memory; set tells
// whether the flag was given (else the config's store.data_dir, then
// defaultDataDir, apply).
type dataDirValue struct {
	dir string
	set bool
}

func (v *dataDirValue) Set(s string) error {
	v.dir, v.set = s, true
	return nil
}

func (v *dataDirValue) String() string {
	if v == nil {
		return ""
	}
	return v.dir
}

// defaultDataDir is the data directory when neither --data-dir nor the
// config's store.data_dir names one: $TOLLGATE_DATA_DIR when set (even
// empty, which means memory), else $XDG_STATE_HOME/tollgate, else
// ~/.local/state/tollgate (the XDG base directory for state), else
// memory when there is no home directory.
func defaultDataDir() string {
	if d, ok := os.LookupEnv("TOLLGATE_DATA_DIR"); ok {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "tollgate")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "state", "tollgate")
}
