// Command tollgate is the one binary of the tollgate traffic-control layer.
//
// Usage:
//
//	tollgate serve [flags]                  run the throttling server (tollgate serve -h)
//	tollgate check [--preset NAME | FILE]   validate a quota config and print its table
//	tollgate sim (--preset NAME | --scenario FILE) [--out DIR]   simulate throttling, retries and autoscaling
//	tollgate replay [--config FILE] [--json] [--html FILE] FILE|DIR...   replay CloudTrail logs through the throttle and retries
//	tollgate version (or --version)         print the module version and VCS revision
//
// Every command prints its help with --help (to stdout, exit status 0); a
// usage error exits with status 2 and names the valid choices.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/tollgate/tollgate/pool/process"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand of the binary.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"check":   checkCommand(),
		"serve":   serveCommand(),
		"replay":  replayCommand(),
		"sim":     simCommand(),
		"state":   stateCommand(),
		"version": versionCommand(),
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		usage(stderr, cmds)
		return 2
	}
	switch args[0] {
	case process.SupervisorCommand:
		// Internal, not in the usage: serve starts each instance's
		// command through it (see pool/process.Supervise).
		return process.Supervise(args[1:])
	case "help", "-h", "-help", "--help":
		if len(args) > 1 { // tollgate help serve
			if c, ok := cmds[args[1]]; ok {
				return c.run([]string{"--help"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "tollgate: unknown command %q\n", args[1])
			usage(stderr, cmds)
			return 2
		}
		usage(stdout, cmds)
		return 0
	case "-version", "--version", "-v":
		// As most tools answer it: the same as tollgate version.
		return cmds["version"].run(args[1:], stdout, stderr)
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tollgate: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

// commandOrder is the order of the commands in the usage.
var commandOrder = []string{"serve", "check", "sim", "replay", "state", "version"}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: tollgate <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, name := range commandOrder {
		if c, ok := cmds[name]; ok {
			fmt.Fprintf(w, "  %-8s %s\n", name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nrun 'tollgate <command> --help' for the flags of a command")
}
