// Package crashtest checks that `tollgate serve` with a data directory
// keeps every write it acknowledged: concurrent writers register Cloud
// Map instances, request quota increases and approve them against a real
// tollgate process, which is killed with SIGKILL at a random moment of
// each round and started again on the same data directory; every write
// answered before the kill must then be there, whole.
//
// The package owns the processes it starts and the writers' goroutines,
// all joined before Run returns. It never reads the data file itself: it
// sees the state only through the AWS APIs, as a tenant would.
//
// # Lifecycle
//
//  1. Run(ctx, Options), which returns a Report once every round ran, or
//     the first loss found.
package crashtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Options configure Run. Binary and DataDir are required.
type Options struct {
	// Binary is the tollgate binary.
	Binary string
	// DataDir is the data directory every round's server uses.
	DataDir string
	// Rounds is how many kill-and-restart rounds run; 0 means 3.
	Rounds int
	// Writers is how many writers write at once; 0 means 4.
	Writers int
	// MinKill and MaxKill bound when, after the writers start, a round's
	// kill comes (uniform between them); 0 means 300 ms and 1.5 s.
	MinKill, MaxKill time.Duration
	// StartTimeout bounds a server's start; 0 means 60 s.
	StartTimeout time.Duration
	// Rand picks the kill moments; nil means a random seed.
	Rand *rand.Rand
	// Log receives a line per round; nil discards them.
	Log func(format string, args ...any)
}

// Report is what Run saw.
type Report struct {
	Rounds       int
	Acknowledged int // writes answered before a kill, all checked after it
	Lost         int // of them, missing or torn after the restart
	FailedStarts int
	// Restart is each restart's time until the server listened.
	Restart []time.Duration
}

// ErrLost is wrapped by Run's error when an acknowledged write is missing
// or torn after a restart, or a restart failed.
var ErrLost = errors.New("crashtest: an acknowledged write was lost")

func (o *Options) defaults() {
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Writers == 0 {
		o.Writers = 4
	}
	if o.MinKill == 0 {
		o.MinKill = 300 * time.Millisecond
	}
	if o.MaxKill == 0 {
		o.MaxKill = 1500 * time.Millisecond
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Run runs the rounds: in each, the writers write until the kill, the
// server is started again, and every write acknowledged so far (this
// round's and every earlier one's) is checked.
func Run(ctx context.Context, o Options) (Report, error) {
	o.defaults()
	var rep Report
	etc, err := os.MkdirTemp("", "crashtest")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(etc)
	args, err := writeConfig(etc, o)
	if err != nil {
		return rep, err
	}
	acked := &ledger{}
	srv, _, err := start(ctx, o, args)
	if err != nil {
		return rep, fmt.Errorf("first start: %w", err)
	}
	defer func() { srv.kill() }()
	for round := range o.Rounds {
		c := newClients(srv.addr)
		if err := c.prepare(ctx, round, o.Writers, acked); err != nil {
			return rep, fmt.Errorf("round %d: preparing: %w", round, err)
		}
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range o.Writers {
			wg.Go(func() { c.write(wctx, round, w, acked) })
		}
		kill := o.MinKill + time.Duration(o.Rand.Int64N(int64(o.MaxKill-o.MinKill)+1))
		select {
		case <-time.After(kill):
		case <-ctx.Done():
		}
		srv.kill() // the writers' calls in flight fail: not acknowledged
		stop()
		wg.Wait()
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		var took time.Duration
		srv, took, err = start(ctx, o, args)
		rep.Rounds++
		if err != nil {
			rep.FailedStarts++
			return rep, fmt.Errorf("%w: round %d: the restart failed: %w", ErrLost, round, err)
		}
		rep.Restart = append(rep.Restart, took)
		n, lost := newClients(srv.addr).check(ctx, acked)
		rep.Acknowledged = n
		rep.Lost += len(lost)
		o.Log("round %d: killed after %v; %d writes acknowledged so far, %d lost; restarted in %v", round, kill.Round(time.Millisecond), n, len(lost), took.Round(time.Millisecond))
		if len(lost) > 0 {
			return rep, fmt.Errorf("%w: round %d: %s", ErrLost, round, strings.Join(lost[:min(len(lost), 10)], "; "))
		}
	}
	return rep, nil
}

// writeConfig writes the servers' config (ECS, Cloud Map and Service
// Quotas; every writer's key of every round mapped to an account of its
// own, so that the closed requests kept are bounded per account) and
// admin token, and returns serve's arguments.
func writeConfig(dir string, o Options) ([]string, error) {
	var b strings.Builder
	b.WriteString("services:\n  - preset: ecs\n  - preset: cloudmap\n  - preset: servicequotas\naccess_keys:\n")
	for r := range o.Rounds {
		for w := range o.Writers {
			fmt.Fprintf(&b, "  %s: %q\n", accessKey(r, w), account(r, w))
		}
	}
	cfg, tok := filepath.Join(dir, "tollgate.yaml"), filepath.Join(dir, "token")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(tok, []byte(adminToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	return []string{"serve", "--listen", "127.0.0.1:0", "--config", cfg, "--admin-token-file", tok, "--data-dir", o.DataDir}, nil
}

const adminToken = "crashtest"

func accessKey(round, writer int) string { return fmt.Sprintf("AKIDCRASHR%dW%d", round, writer) }
func account(round, writer int) string   { return fmt.Sprintf("9%05d%06d", round, writer) }

// server is a running tollgate.
type server struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

// kill sends SIGKILL and waits for the process to exit.
func (s *server) kill() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
}

var listening = regexp.MustCompile(`msg=listening addr=(\S+)`)

// start starts the server and waits until it listens; it returns how
// long that took.
func start(ctx context.Context, o Options, args []string) (*server, time.Duration, error) {
	began := time.Now()
	cmd := exec.Command(o.Binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOLLGATE_ADMIN_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	var tail []string
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			if tail = append(tail, line); len(tail) > 20 {
				tail = tail[1:]
			}
			mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
		close(s.done)
	}()
	t := time.NewTimer(o.StartTimeout)
	defer t.Stop()
	select {
	case s.addr = <-found:
		return s, time.Since(began), nil
	case <-s.done:
		mu.Lock()
		defer mu.Unlock()
		return nil, 0, fmt.Errorf("exited at start: %s", strings.Join(tail, "\n"))
	case <-t.C:
	case <-ctx.Done():
	}
	s.kill()
	return nil, 0, fmt.Errorf("did not listen within %v", o.StartTimeout)
}
