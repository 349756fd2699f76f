package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tollgate/tollgate/config"
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
	var cfg *config.Config
	switch {
	case *preset != "" && fs.NArg() == 0:
		s, err := quota.Preset(*preset)
		if err != nil {
			return usageError(stderr, "check", "%v", err)
		}
		cfg = &config.Config{}
		if cfg.Quota, err = quota.NewConfig([]*quota.Service{s}, nil, nil); err != nil {
			fmt.Fprintln(stderr, "tollgate check:", err)
			return 1
		}
	case *preset == "" && fs.NArg() == 1:
		var err error
		data, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "%v: %v\n", config.ErrInvalidConfig, err)
			return 1
		}
		if cfg, err = config.Parse(fs.Arg(0), data); err != nil {
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
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return 0
}
