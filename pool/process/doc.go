// Package process runs the instances of an autoscaled service as local
// processes: it is the [runner.Runner] behind `tollgate serve` on one
// machine. A [Runner] is made for one revision of a service from
// [Options] (command, args, env, working directory, readiness check, stop
// grace) that [New] validates, so a config loader can reject a command
// that does not exist or is not executable at start and on reload
// ([ErrCommand], inside an [*OptionError] naming the field).
//
// # What it owns
//
// Each instance is one process and everything it starts:
//
//   - The Cloud Run container contract: PORT is a free loopback port the
//     runner picks, outside the kernel's ephemeral port range (20000–31999
//     with Linux's default range), so that no outgoing connection takes it
//     while the instance starts; K_SERVICE, K_REVISION and K_CONFIGURATION are set as
//     Cloud Run sets them; the rest of the environment is Options.Env on
//     top of a minimal part of tollgate's (see [Options.Env]).
//   - Its own process group (Setpgid), which Stop signals as a whole, and
//     Linux's parent-death signal (Pdeathsig: SIGKILL, or SIGUSR1 for a
//     supervisor), so an instance dies with tollgate even when tollgate is
//     killed (with all it started, through the supervisor, below). The kernel ties
//     that signal to the thread that forked, not to the process, so every
//     instance is forked from one goroutine locked to an OS thread that
//     never exits (https://go.dev/issue/27505).
//   - Its output: each line written to stdout or stderr is logged with the
//     service, revision, instance id and stream; lines longer than
//     [MaxLogLine] are cut, so memory stays bounded. The instance's
//     lifecycle ("instance ready", "instance stopped", "instance exited on
//     its own") is logged at Info by whoever drives the runner, package
//     pool, which knows the cold start, the address and why it stopped the
//     instance; the runner logs its own view only at Debug ("process
//     ready", "process stopped", "process exited", with the pid and the
//     exit status), so a standalone user can still see it without the
//     pool's lines appearing twice.
//   - Its CPU time: where the runner may create cgroups (a writable,
//     delegated cgroup v2), each instance is born into its own cgroup
//     (clone3 CLONE_INTO_CGROUP) and CPUTime reads its cpu.stat; otherwise
//     CPUTime sums /proc for the instance's process group and descendants.
//     Which one is used is logged once per process.
//   - Its limits (Options.CPUs, Options.Memory): in its cgroup v2 where
//     tollgate's has the cpu and memory controllers to give; else in
//     cgroups of its own in the cgroup v1 cpu and memory hierarchies,
//     which it is born in because the one forking thread joins them for
//     the fork (v1 places threads; it has no CLONE_INTO_CGROUP); else not
//     at all, said once by New.
//
// It never routes or proxies requests, decides how many instances run or
// restarts one that crashed: that is package pool's job. It never
// signals a process id after the process has been reaped, so it cannot hit
// an unrelated process that reused the id.
//
// # Lifecycle
//
// [Runner.Start] picks the port, forks the process and returns at once;
// the readiness check (a TCP connect to the port or, with
// Readiness.Path, an HTTP GET answered 2xx or 3xx) starts with it and is
// polled every few milliseconds until it passes, the readiness timeout
// (counted from the start) passes, or the process exits. Instance.Ready
// waits for its outcome.
//
// Instance.Stop(grace) sends SIGTERM to the process group (it is the
// exec.Cmd's Cancel), waits up to grace for the main process to exit,
// then sends SIGKILL to the group. Whenever the main process exits, on
// Stop or on its own, what is left of its group (and of its cgroup) is
// killed before the process is reaped. Done is closed once it is reaped
// and its output has been logged; Err is nil after Stop and wraps
// [ErrExited] with the exit status otherwise.
//
// # The instance supervisor
//
// With [Options.Supervisor] (`tollgate serve` sets it), the runner starts
// an instance supervisor ([Supervise], tollgate's hidden
// `instance-supervisor` command) in place of the command, and it starts
// the command: the way a container's shim or init (conmon, tini) runs a
// container's process. The supervisor leads the instance's process group
// and is in its cgroup; the command stays in that group, so Stop's
// SIGTERM and SIGKILL reach it unchanged, and PID, the pid logged and the
// pid in Err are the command's. The supervisor is a child subreaper:
// every process under the instance becomes its child when its own parent
// exits, whatever group or session it moved to. It kills them all when
// the command exits, when Stop's grace period has passed (the runner asks
// it on a control pipe, waits up to 5 s, then kills the group itself) and
// when tollgate dies: its parent-death signal is catchable (SIGUSR1), and
// the end of the control pipe or a changed parent process tells it too.
// It exits with the command's status, or dies of the command's signal.
//
// Starting tollgate's large binary and its runtime for each instance
// would cost milliseconds of every cold start, so the runner keeps one
// warm spare supervisor, the way a zygote or a pre-forked worker is kept:
// when the pool begins to run a revision with no instance to start
// ([Runner.Warm], [runner.Warmer]), and once an instance it started is
// ready (so as not to slow that start), it starts a supervisor that waits, idle, on its control pipe, in a
// process group and a cgroup of its own (made for the next instance), with
// output pipes of its own. Start hands it the instance (the command's
// path, argv, environment with PORT and the K_ variables, and working
// directory, as one JSON line of at most 1 MiB), and it starts the command
// as a supervisor started for it would: its process group, cgroup and
// pipes are the instance's, so the command is counted in the cgroup from
// its first instruction, with the supervisor, as a fresh one is. A burst
// of starts gives the spare to the first; the others start a fresh
// supervisor at once, which is never slower than waiting for a spare to
// be started. A spare found dead at Start is logged, and replaced once the
// instance that Start began fresh is ready (at once if it failed), not in
// a loop; a spare whose context ends (that of the Start or Warm that made
// it: the pool's revision's) or whose runner is closed ([Runner.Close],
// which the pool calls when a revision ends) is stopped; an
// idle spare exits when its control pipe ends or tollgate dies, and it is
// never an instance. Where no spare is at hand, or one cannot take the
// instance, or one took it but died or did not answer within the
// readiness timeout (it is killed), Start starts a fresh supervisor, as
// above.
//
// If tollgate itself is killed, then, no process of any instance is left.
// Without a supervisor the parent-death signal kills each instance's main
// process only: processes an instance started itself are left running;
// where cgroups are used, the next tollgate to start in the same cgroup
// kills and removes what is left of the instances of a tollgate that died.
package process
