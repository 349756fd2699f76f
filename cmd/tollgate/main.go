// Command tollgate is the one binary of the tollgate traffic-control layer.
//
// Usage:
//
//	tollgate serve [flags]                  run the throttling server (tollgate serve -h)
//	tollgate check [--preset NAME | FILE]   validate a quota config and print its table
//	tollgate sim (--preset NAME | --scenario FILE) [--out DIR]   simulate throttling, retries and autoscaling
package main

import (
	"fmt"
	"io"
	"os"
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
		"check": checkCommand(),
		"serve": serveCommand(),
		"sim":   simCommand(),
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tollgate: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: tollgate <command> [flags]")
	fmt.Fprintln(w, "commands:")
	for _, name := range []string{"serve", "check", "sim"} {
		if c, ok := cmds[name]; ok {
			fmt.Fprintf(w, "  %-7s %s\n", name, c.summary)
		}
	}
}
