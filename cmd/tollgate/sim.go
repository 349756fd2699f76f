package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/tollgate/tollgate/sim"
)

func simCommand() command {
	return command{
		summary: "simulate clients, throttle and autoscaler on a virtual clock; print a summary, write plots and CSV",
		run:     runSim,
	}
}

// unsafeFileChars are replaced in run names used as file names.
var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// simSynopsis is the head of `tollgate sim --help`.
const simSynopsis = "tollgate sim (--scenario FILE | --preset NAME) [--out DIR] [--seed N] [--format png|svg|html]"

func runSim(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sim")
	scenario := fs.String("scenario", "", "scenario `FILE` (YAML) to run")
	preset := fs.String("preset", "", "built-in study to run: "+strings.Join(sim.PresetNames(), ", "))
	out := fs.String("out", "", "`DIR`ectory for plots and CSV (default: a new temporary directory)")
	seed := fs.Uint64("seed", 0, "random seed for every run, replacing the scenario's")
	format := fs.String("format", "png", "plot format: png or svg; html writes one self-contained report (tables, figures, scenarios) and the CSVs")
	if code, ok := parseFlags(fs, simSynopsis, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "sim", "unexpected argument %q", fs.Arg(0))
	}
	if (*scenario == "") == (*preset == "") {
		return usageError(stderr, "sim", "give one of --scenario FILE or --preset NAME (%s)", strings.Join(sim.PresetNames(), ", "))
	}
	f := sim.Format(*format)
	if f != sim.PNG && f != sim.SVG && f != sim.HTML {
		return usageError(stderr, "sim", "unknown --format %q: want png, svg or html", *format)
	}
	var (
		study *sim.Study
		err   error
	)
	if *preset != "" {
		if study, err = sim.Preset(*preset); err != nil {
			return usageError(stderr, "sim", "%s", simMessage(err))
		}
	} else if study, err = sim.LoadStudy(*scenario); err != nil {
		fmt.Fprintln(stderr, "tollgate sim:", err)
		return 1
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "seed" {
			for i := range study.Runs {
				study.Runs[i].Seed = *seed
			}
		}
	})
	results, err := study.Run()
	if err != nil {
		fmt.Fprintln(stderr, "tollgate sim:", simMessage(err))
		return 1
	}
	dir := *out
	if dir == "" {
		dir, err = os.MkdirTemp("", "tollgate-sim-")
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate sim:", simMessage(err))
		return 1
	}
	if head := studyHeading(study); head != "" {
		fmt.Fprintf(stdout, "%s\n\n", head)
	}
	if err := sim.WriteSummary(stdout, results); err != nil {
		fmt.Fprintln(stderr, "tollgate sim:", simMessage(err))
		return 1
	}
	files, err := writeSimFiles(dir, study, results, f)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate sim:", simMessage(err))
		return 1
	}
	fmt.Fprintf(stdout, "\nwrote %d files to %s\n", len(files), dir)
	return 0
}

// writeSimFiles writes a CSV and a plot per run (STUDY-RUN.csv, STUDY-RUN.png,
// or STUDY.csv and STUDY.png for a single run), and STUDY-comparison.png when
// there are several runs, into dir. It returns the files' names.
// With the html format, the plots are one STUDY.html report instead.
func writeSimFiles(dir string, study *sim.Study, results []*sim.Result, f sim.Format) ([]string, error) {
	prefix := unsafeFileChars.ReplaceAllString(study.Name, "_")
	if prefix == "" {
		prefix = "sim"
	}
	var names []string
	used := map[string]bool{}
	write := func(name string, fn func(io.Writer) error) error {
		path := filepath.Join(dir, name)
		file, err := os.Create(path)
		if err != nil {
			return err
		}
		err = fn(file)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		names = append(names, name)
		return nil
	}
	for i, r := range results {
		run := unsafeFileChars.ReplaceAllString(r.Scenario.Name, "_")
		if run == "" {
			run = fmt.Sprintf("run-%d", i+1)
		}
		base := prefix + "-" + run
		if len(results) == 1 {
			base = prefix
		}
		if used[base] || base == prefix+"-comparison" {
			base = fmt.Sprintf("%s-%d", base, i+1)
		}
		used[base] = true
		if err := write(base+".csv", func(w io.Writer) error { return sim.WriteCSV(w, r) }); err != nil {
			return nil, err
		}
		if f == sim.HTML {
			continue
		}
		if err := write(base+"."+string(f), func(w io.Writer) error { return sim.WritePlot(w, r, f) }); err != nil {
			return nil, err
		}
	}
	if f == sim.HTML {
		err := write(prefix+".html", func(w io.Writer) error { return sim.WriteHTML(w, study, results) })
		return names, err
	}
	if len(results) > 1 {
		if err := write(prefix+"-comparison."+string(f), func(w io.Writer) error { return sim.WriteComparisonPlot(w, results, f) }); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// studyHeading is the line naming a study above its summary: "name:
// description", or whichever of the two it has.
func studyHeading(st *sim.Study) string {
	switch {
	case st.Name != "" && st.Description != "":
		return st.Name + ": " + st.Description
	case st.Name != "":
		return st.Name
	}
	return st.Description
}

// simMessage is err's text for a line that already says "tollgate sim:":
// without the sim package's own "sim: " prefix, which would say it twice.
func simMessage(err error) string { return strings.TrimPrefix(err.Error(), "sim: ") }
