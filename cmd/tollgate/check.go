package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/quota"
)

func checkCommand() command {
	return command{
		summary: "validate a quota config (or show a preset) and print its table",
		run:     runCheck,
	}
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "", "print a built-in service instead of a file: "+fmt.Sprint(quota.PresetNames()))
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tollgate check FILE | tollgate check --preset NAME")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var cfg *quota.Config
	switch {
	case *preset != "" && fs.NArg() == 0:
		s, err := quota.Preset(*preset)
		if err != nil {
			fmt.Fprintln(stderr, "tollgate check:", err)
			return 2
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
	default:
		fs.Usage()
		return 2
	}
	if err := cfg.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, "tollgate check:", err)
		return 1
	}
	return 0
}
