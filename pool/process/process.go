package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/pool/runner"
)

// Defaults for the zero values of [Options].
const (
	// DefaultStopGrace is how long Stop waits after SIGTERM before it
	// kills, as Cloud Run does.
	DefaultStopGrace = 10 * time.Second
	// DefaultReadyTimeout is how long an instance may take from its start
	// to passing its readiness check: Cloud Run's default startup probe
	// allows 240 s.
	DefaultReadyTimeout = 240 * time.Second
	// MaxLogLine is the longest line of an instance's output that is
	// logged whole; a longer line is logged cut to this many bytes, with
	// truncated=true, and the rest of it is dropped.
	MaxLogLine = 16 << 10
)

// Errors New wraps (inside an [*OptionError]) and instances report.
var (
	// ErrCommand means the command does not exist, is not a regular file
	// or is not executable.
	ErrCommand = errors.New("command is not an executable file")
	// ErrInvalid means an option other than the command is invalid.
	ErrInvalid = errors.New("invalid option")
	// ErrExited means an instance exited on its own, not through Stop.
	ErrExited = errors.New("instance exited")
	// ErrNotReady means an instance did not pass its readiness check
	// within the readiness timeout.
	ErrNotReady = errors.New("instance not ready")
)

// OptionError is the error New returns for invalid [Options]. Field names
// the option the way a config file would (command, dir, env[2],
// readiness.path) so a config loader can point at it.
type OptionError struct {
	// Field is the option at fault.
	Field string
	// Err says what is wrong with it; it wraps ErrCommand or ErrInvalid.
	Err error
}

func (e *OptionError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *OptionError) Unwrap() error { return e.Err }

// Readiness is how a runner decides that an instance is ready to serve.
type Readiness struct {
	// Path, when set, is probed with HTTP GET on the instance; a status
	// from 200 to 399 passes (as a Kubernetes or Cloud Run HTTP probe).
	// It must start with "/". Empty means a TCP connect to the port
	// passes (Cloud Run's default startup probe).
	Path string
	// Timeout bounds the time from an instance's start to passing the
	// check. Zero means DefaultReadyTimeout.
	Timeout time.Duration
}

// Options configure a [Runner]. Only Command is required.
type Options struct {
	// Command is the program to run (argv[0]): a path, relative to Dir
	// when it is relative and contains a slash, or a name looked up in
	// tollgate's PATH.
	Command string
	// Args are the arguments after the command.
	Args []string
	// Env holds KEY=value pairs added to the minimal environment an
	// instance inherits from tollgate (PATH, HOME, USER, LOGNAME, SHELL,
	// TMPDIR, TZ, LANG, LANGUAGE and LC_*). They may not set PORT,
	// K_SERVICE, K_REVISION or K_CONFIGURATION, which the runner sets.
	Env []string
	// Dir is the working directory of instances; empty means tollgate's.
	Dir string
	// Readiness is the readiness check; the zero value is a TCP connect
	// within DefaultReadyTimeout.
	Readiness Readiness
	// StopGrace is the longest time Stop waits between SIGTERM and
	// SIGKILL, and the grace Stop uses when given none. Zero means
	// DefaultStopGrace.
	StopGrace time.Duration
	// Logger receives the runner's events and every line instances write
	// to stdout and stderr. Nil means slog.Default().
	Logger *slog.Logger
	// NoCgroup makes the runner measure CPU time from /proc even where it
	// could create a cgroup per instance, and enforce no CPUs or Memory.
	NoCgroup bool
	// CPUs, when positive, limits each instance to that many CPUs: the
	// cgroup v2 cpu.max of its cgroup (cpus × 100 ms per 100 ms), or on a
	// cgroup v1 machine its cpu.cfs_quota_us per cpu.cfs_period_us.
	// Memory, when positive, limits it to that many bytes (memory.max or
	// v1's memory.limit_in_bytes, no swap); an instance the OOM killer
	// kills exits with an error wrapping runner.ErrOOMKilled. New chooses
	// cgroup v2 where tollgate's cgroup has these controllers for its
	// instances, else cgroup v1 where tollgate may make cgroups in those
	// hierarchies, and says which in the log; where neither can, it says
	// so once and instances run unlimited.
	CPUs   float64
	Memory int64
	// Supervisor, when set, is the argv prefix of an instance supervisor
	// (see [Supervise]; `tollgate serve` sets it to its own executable
	// and [SupervisorCommand]): the runner starts it, in the instance's
	// process group and cgroup, with "--", the command's path, argv[0]
	// and arguments after it, and it starts the command. With it, when
	// tollgate is killed, every process an instance started dies too.
	// Empty means the command is started directly: tollgate's death then
	// kills only each instance's main process (Linux's parent-death
	// signal), and what an instance started itself is left running until
	// the next tollgate starts, where cgroups are used.
	//
	// With it, the runner also keeps one warm spare supervisor (see
	// [Supervise], -spare): started by [Runner.Warm], once an instance it
	// started is ready, or after a Start that failed, and idle until then,
	// it takes the next instance, which then starts without the
	// supervisor's exec and runtime start (see the package
	// documentation). The spare is stopped when the context of the Start
	// or Warm that made it ends or on [Runner.Close], which the pool calls
	// when the revision is done with.
	Supervisor []string
	// Ports, when set, is where instance ports are picked from (a host
	// firewall's or a benchmark's fixed range); the zero PortRange picks
	// from 20000–31999 less the kernel's ephemeral range (see the package
	// documentation).
	Ports PortRange
}

// PortRange is an inclusive range of TCP ports.
type PortRange struct{ Low, High int }

// IsZero reports whether r is the zero PortRange: the default ports.
func (r PortRange) IsZero() bool { return r == PortRange{} }

// String formats r as "LOW-HIGH".
func (r PortRange) String() string { return strconv.Itoa(r.Low) + "-" + strconv.Itoa(r.High) }

// ParsePortRange reads "LOW-HIGH", inclusive, of unprivileged ports
// (1024–65535).
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	l, err1 := strconv.Atoi(strings.TrimSpace(lo))
	h, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil {
		return PortRange{}, fmt.Errorf("%w: port range %q is not LOW-HIGH, such as 21000-21999", ErrInvalid, s)
	}
	r := PortRange{l, h}
	return r, r.check()
}

func (r PortRange) check() error {
	if r.Low < 1024 || r.High > 65535 || r.Low > r.High {
		return fmt.Errorf("%w: port range %s: want 1024 <= LOW <= HIGH <= 65535", ErrInvalid, r)
	}
	return nil
}

// Runner starts instances as local processes. It implements
// [runner.Runner] and is safe for concurrent use.
type Runner struct {
	opts   Options
	path   string // the resolved command
	super  string // the resolved Supervisor[0], or ""
	env    []string
	log    *slog.Logger
	cgroup string // cgroup v2 directory instances' cgroups go under; "" for /proc
	// unlimited: CPUs or Memory are set but cgroup v2 cannot enforce them
	unlimited bool
	v1        *v1Limits // enforces them with cgroup v1 instead, or nil

	spares spares // the idle spare supervisor, with Supervisor
}

var (
	_ runner.Runner = (*Runner)(nil)
	_ runner.Warmer = (*Runner)(nil)
)

// reserved are the variables the runner sets itself.
var reserved = []string{"PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"}

// New validates opts and returns a runner. Its error is an [*OptionError]
// wrapping ErrCommand when the command does not exist or is not
// executable, ErrInvalid for other options.
func New(opts Options) (*Runner, error) {
	if opts.StopGrace < 0 {
		return nil, &OptionError{"stop_grace", fmt.Errorf("%w: negative (%v)", ErrInvalid, opts.StopGrace)}
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.Readiness.Timeout < 0 {
		return nil, &OptionError{"readiness.timeout", fmt.Errorf("%w: negative (%v)", ErrInvalid, opts.Readiness.Timeout)}
	}
	if opts.Readiness.Timeout == 0 {
		opts.Readiness.Timeout = DefaultReadyTimeout
	}
	if p := opts.Readiness.Path; p != "" && !strings.HasPrefix(p, "/") {
		return nil, &OptionError{"readiness.path", fmt.Errorf("%w: %q does not start with /", ErrInvalid, p)}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Dir != "" {
		fi, err := os.Stat(opts.Dir)
		if err != nil {
			return nil, &OptionError{"dir", fmt.Errorf("%w: %w", ErrInvalid, err)}
		}
		if !fi.IsDir() {
			return nil, &OptionError{"dir", fmt.Errorf("%w: %s is not a directory", ErrInvalid, opts.Dir)}
		}
	}
	for i, kv := range opts.Env {
		k, _, ok := strings.Cut(kv, "=")
		field := "env[" + strconv.Itoa(i) + "]"
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return nil, &OptionError{field, fmt.Errorf("%w: %q is not KEY=value", ErrInvalid, kv)}
		}
		for _, r := range reserved {
			if k == r {
				return nil, &OptionError{field, fmt.Errorf("%w: %s is set by tollgate, as by Cloud Run", ErrInvalid, k)}
			}
		}
	}
	if !opts.Ports.IsZero() {
		if err := opts.Ports.check(); err != nil {
			return nil, &OptionError{"ports", err}
		}
	}
	path, err := resolve(opts.Command, opts.Dir)
	if err != nil {
		return nil, &OptionError{"command", err}
	}
	super := ""
	if len(opts.Supervisor) > 0 {
		if super, err = resolve(opts.Supervisor[0], ""); err != nil {
			return nil, &OptionError{"supervisor", err}
		}
	}
	r := &Runner{
		opts:  opts,
		path:  path,
		super: super,
		env:   dedupEnv(append(inheritedEnv(), opts.Env...)),
		log:   opts.Logger,
	}
	if !opts.NoCgroup {
		r.cgroup = cgroupParent(opts.Logger)
	}
	r.checkLimits()
	return r, nil
}

// resolve finds the executable file command names, as exec would.
func resolve(command, dir string) (string, error) {
	if command == "" {
		return "", fmt.Errorf("%w: empty", ErrCommand)
	}
	path := command
	if !strings.Contains(command, "/") {
		p, err := exec.LookPath(command)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("%w: %q not found in PATH", ErrCommand, command)
		}
		path = p
	} else if !filepath.IsAbs(command) && dir != "" {
		path = filepath.Join(dir, command)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %w", ErrCommand, command, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: %s does not exist", ErrCommand, abs)
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrCommand, err)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%w: %s is not a regular file", ErrCommand, abs)
	case fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%w: %s is not executable (mode %v)", ErrCommand, abs, fi.Mode().Perm())
	}
	if err := syscall.Access(abs, 1 /* X_OK */); err != nil {
		return "", fmt.Errorf("%w: %s is not executable by tollgate: %w", ErrCommand, abs, err)
	}
	return abs, nil
}

// dedupEnv keeps the last of the entries with the same key, as exec.Cmd
// does: a spare supervisor passes the environment on as it is, and getenv
// returns the first entry, so an Env entry must replace the inherited one.
func dedupEnv(env []string) []string {
	last := map[string]int{}
	for n, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = n
	}
	out := make([]string, 0, len(last))
	for n, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); last[k] == n {
			out = append(out, kv)
		}
	}
	return out
}

// inheritedEnv is the part of tollgate's environment instances inherit.
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "HOME", k == "USER", k == "LOGNAME", k == "SHELL",
			k == "TMPDIR", k == "TZ", k == "LANG", k == "LANGUAGE", strings.HasPrefix(k, "LC_"):
			env = append(env, kv)
		}
	}
	return env
}

// Start launches one instance of spec as a process and returns once it
// has been started. See the package documentation for what it sets up.
func (r *Runner) Start(ctx context.Context, spec runner.InstanceSpec) (runner.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting instance %s of %s: %w", spec.ID, spec.Service, err)
	}
	port, err := r.freePort()
	if err != nil {
		return nil, fmt.Errorf("starting instance %s of %s: picking a port: %w", spec.ID, spec.Service, err)
	}
	i, err := r.start(ctx, spec, port)
	if err != nil {
		r.releasePort(port)
		return nil, fmt.Errorf("starting instance %s of %s: %w", spec.ID, spec.Service, err)
	}
	return i, nil
}

func (r *Runner) releasePort(port int) { heldPorts.release(port) }

// randomSuffix returns 8 random hex digits.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
