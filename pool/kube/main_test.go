package kube

import (
	"flag"
	"os"
	"testing"

	"github.com/tollgate/tollgate/internal/testflags"
)

// TestMain starts every parallel test at once unless -parallel is given
// (go test's default is GOMAXPROCS, 2 here): each has its own fake
// clientset or cluster namespace and mostly waits on the runner's timers
// (retire settles, heartbeats, readiness), not on the CPU; two at a time
// left the package 11 s long behind its longest test's 5 s.
func TestMain(m *testing.M) {
	flag.Parse()
	testflags.ParallelDefault(32)
	os.Exit(m.Run())
}
