package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/tollgate/tollgate/quota"
)

func checkCommand() command {
	return command{
		summary: "validate a quota config (or show a preset) and print its table",
		run:     runCheck,
	}
}

// checkSynopsis is the head of `tollgate check --help`.
const checkSynopsis = `tollgate check FILE | tollgate check --preset NAME

Validate a quota config and print its table, or print a built-in service's.`

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check")
	preset := fs.String("preset", "", "print a built-in service instead of a file: "+strings.Join(quota.PresetNames(), ", "))
	if code, ok := parseFlags(fs, checkSynopsis, args, stdout, stderr); !ok {
		return code
	}
	var cfg *quota.Config
	switch {
	case *preset != "" && fs.NArg() == 0:
		s, err := quota.Preset(*preset)
		if err != nil {
			return usageError(stderr, "check", "%v", err)
		}
		if cfg, err = quota.NewConfig([]*quota.Service{s}, nil, nil); err != nil {
			fmt.Fprintln(stderr, "tollgate check:", err)
			return 1
		}
	case *preset == "" && fs.NArg() == 1:
		var err error
		if cfg, err = quota.Load(fs.Arg(0)); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	case *preset != "":
		return usageError(stderr, "check", "give a FILE or --preset, not both")
	case fs.NArg() == 0:
		return usageError(stderr, "check", "give a config FILE, or --preset NAME (%s)", strings.Join(quota.PresetNames(), ", "))
	default:
		return usageError(stderr, "check", "one config FILE at a time, not %d", fs.NArg())
	}
	if err := cfg.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, "tollgate check:", err)
		return 1
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return 0
}
