// Package testflags sets go test's own flags from a TestMain.
package testflags

import (
	"flag"
	"strconv"
)

// ParallelDefault sets -test.parallel, how many parallel tests run at
// once, to n unless the command line set it. go test's default is
// GOMAXPROCS, which on a 2-core machine holds back tests that wait on
// real servers, timers and processes far more than they use the CPU.
// Call it from TestMain, after flag.Parse; without the testing flags
// registered it does nothing.
func ParallelDefault(n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && flag.Lookup("test.parallel") != nil {
		_ = flag.Set("test.parallel", strconv.Itoa(max(n, 1)))
	}
}
