package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

func versionCommand() command {
	return command{
		summary: "print the module version and VCS revision of this binary",
		run:     runVersion,
	}
}

// versionSynopsis is the head of `tollgate version --help`.
const versionSynopsis = `tollgate version

Print the module version and VCS revision this binary was built from.`

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version")
	if code, ok := parseFlags(fs, versionSynopsis, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(stderr, "version", "unexpected argument %q", fs.Arg(0))
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "tollgate: no build information (built without module support)")
		return 0
	}
	io.WriteString(stdout, versionText(info))
	return 0
}

// versionText describes a build: the main module's version ("(devel)" for
// a build from a checkout), the VCS revision and commit time when the
// build recorded them, and the Go version.
func versionText(info *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	fmt.Fprintf(&b, "tollgate %s\n", version)
	fmt.Fprintf(&b, "module   %s\n", info.Main.Path)
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		fmt.Fprintf(&b, "revision %s\n", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, "commit   %s\n", t)
		}
	} else {
		fmt.Fprintf(&b, "revision unknown (built outside a VCS checkout, or with -buildvcs=false)\n")
	}
	fmt.Fprintf(&b, "go       %s\n", info.GoVersion)
	return b.String()
}
