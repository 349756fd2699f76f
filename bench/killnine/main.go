// Command killnine runs the crash harness (internal/crashtest) against a
// tollgate binary: concurrent writers, SIGKILL at a random moment of each
// round, restart, every acknowledged write checked. It prints one line
// per round and a summary; it exits 1 on a loss or a failed start.
//
//	go build -o /tmp/tollgate ./cmd/tollgate
//	go run ./bench/killnine -bin /tmp/tollgate -rounds 100
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"time"

	"github.com/tollgate/tollgate/internal/crashtest"
)

func main() {
	bin := flag.String("bin", "", "the tollgate binary (required)")
	rounds := flag.Int("rounds", 100, "kill-and-restart rounds")
	writers := flag.Int("writers", 4, "concurrent writers")
	dir := flag.String("data-dir", "", "data directory (default: a new temporary one)")
	flag.Parse()
	if *bin == "" || *rounds < 1 || *writers < 1 {
		fmt.Fprintln(os.Stderr, "killnine: -bin is required; -rounds and -writers must be at least 1")
		os.Exit(2)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "killnine")
		if err != nil {
			fmt.Fprintln(os.Stderr, "killnine:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	began := time.Now()
	rep, err := crashtest.Run(ctx, crashtest.Options{Binary: *bin, DataDir: *dir, Rounds: *rounds, Writers: *writers,
		Log: func(format string, args ...any) { fmt.Printf(format+"\n", args...) }})
	restarts := slices.Sorted(slices.Values(rep.Restart))
	fmt.Printf("rounds %d, writers %d: %d acknowledged writes checked after the last restart, %d lost, %d failed starts; %v in all\n",
		rep.Rounds, *writers, rep.Acknowledged, rep.Lost, rep.FailedStarts, time.Since(began).Round(time.Second))
	if n := len(restarts); n > 0 {
		fmt.Printf("restart to listening: median %v, max %v\n", restarts[n/2].Round(time.Millisecond), restarts[n-1].Round(time.Millisecond))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "killnine:", err)
		os.Exit(1)
	}
}
