package testflags_test

import (
	"flag"
	"testing"

	"github.com/tollgate/tollgate/internal/testflags"
)

// This package's TestMain is go test's own: -test.parallel is whatever
// the command line gave, GOMAXPROCS otherwise.
func TestParallelDefaultUnlessGiven(t *testing.T) {
	f := flag.Lookup("test.parallel")
	was := f.Value.String()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	testflags.ParallelDefault(17)
	want := "17"
	if given {
		want = was // the command line's stays
	}
	if got := f.Value.String(); got != want {
		t.Errorf("-test.parallel = %s, want %s (given on the command line: %v)", got, want, given)
	}
}
