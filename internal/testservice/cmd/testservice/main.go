// Command testservice is the HTTP service the pool tests run as instances.
// It honours the Cloud Run container contract (listen on $PORT) and has
// knobs for what an autoscaler must cope with. Each knob is a flag and,
// as a default for the flag, an environment variable:
//
//	-latency D         TESTSERVICE_LATENCY         time every request waits (default 0)
//	-cpu D             TESTSERVICE_CPU             CPU time every request burns (default 0)
//	-startup-delay D   TESTSERVICE_STARTUP_DELAY   wait before listening (default 0)
//	-healthy-after D   TESTSERVICE_HEALTHY_AFTER   /healthz answers 503 until D after listening
//	-crash-after N     TESTSERVICE_CRASH_AFTER     exit 1 after serving N requests (0: never)
//	-ignore-sigterm    TESTSERVICE_IGNORE_SIGTERM  ignore SIGTERM (value 1 or true)
//	-spawn-child       TESTSERVICE_SPAWN_CHILD     start a child process that sleeps until killed
//	-child-session     TESTSERVICE_CHILD_SESSION   start that child in a session of its own (setsid)
//	-exit-at-once N    TESTSERVICE_EXIT            exit with status N before listening (-1: never)
//
// Requests:
//
//	GET /healthz              200 "ok" (503 until -healthy-after has passed;
//	                          500 once /sicken was called, or no answer at all
//	                          once /sicken?hang=1 was)
//	GET /sicken[?hang=1]      makes /healthz fail from now on, as a liveness
//	                          check sees a deadlocked service; 200 "sick"
//	GET /env                  the environment as a JSON object
//	GET /pids                 {"pid":…,"pgid":…,"children":[…]} as JSON
//	GET /log?line=S&n=K&count=C  writes S (or K bytes of 'x') as one line to stdout, C times (default 1)
//	POST /echo                reads the whole body, then 200 "<n> bytes"
//	GET /alloc?mib=N          allocates and touches N MiB (at most 4096), kept
//	                          until the process exits, then 200 "<total> MiB held"
//	any other path            200 "ok <pid>" after ?latency= and ?cpu= (Go
//	                          durations; default the flags), counted for -crash-after
//
// On SIGTERM it stops accepting, finishes what is in flight and exits 0.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

type config struct {
	latency, cpu, startupDelay, healthyAfter time.Duration
	crashAfter                               int64
	ignoreSIGTERM, spawnChild, childSession  bool
	exitAtOnce                               int
}

func envDuration(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(name))
	return d
}

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}

func envInt(name string, def int64) int64 {
	v, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil {
		return def
	}
	return v
}

func run(args []string) int {
	if len(args) == 1 && args[0] == "-sleep-child" {
		// The child started by -spawn-child: sleep until killed.
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP)
		select {}
	}
	var c config
	fs := flag.NewFlagSet("testservice", flag.ContinueOnError)
	fs.DurationVar(&c.latency, "latency", envDuration("TESTSERVICE_LATENCY"), "time every request waits")
	fs.DurationVar(&c.cpu, "cpu", envDuration("TESTSERVICE_CPU"), "CPU time every request burns")
	fs.DurationVar(&c.startupDelay, "startup-delay", envDuration("TESTSERVICE_STARTUP_DELAY"), "wait before listening")
	fs.DurationVar(&c.healthyAfter, "healthy-after", envDuration("TESTSERVICE_HEALTHY_AFTER"), "/healthz answers 503 until this long after listening")
	fs.Int64Var(&c.crashAfter, "crash-after", envInt("TESTSERVICE_CRASH_AFTER", 0), "exit 1 after serving this many requests (0: never)")
	fs.BoolVar(&c.ignoreSIGTERM, "ignore-sigterm", envBool("TESTSERVICE_IGNORE_SIGTERM"), "ignore SIGTERM")
	fs.BoolVar(&c.spawnChild, "spawn-child", envBool("TESTSERVICE_SPAWN_CHILD"), "start a child process that sleeps until killed")
	fs.BoolVar(&c.childSession, "child-session", envBool("TESTSERVICE_CHILD_SESSION"), "start the child in a session of its own (setsid)")
	fs.IntVar(&c.exitAtOnce, "exit-at-once", int(envInt("TESTSERVICE_EXIT", -1)), "exit with this status before listening (-1: never)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if c.exitAtOnce >= 0 {
		fmt.Fprintf(os.Stderr, "testservice: exiting with status %d as told\n", c.exitAtOnce)
		return c.exitAtOnce
	}
	term := make(chan os.Signal, 1)
	if c.ignoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM)
	}
	var children []int
	if c.spawnChild {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "testservice:", err)
			return 1
		}
		child := exec.Command(self, "-sleep-child")
		if c.childSession {
			child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "testservice: starting child:", err)
			return 1
		}
		children = append(children, child.Process.Pid)
		go func() { _ = child.Wait() }()
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080" // the Cloud Run default
	}
	if c.startupDelay > 0 {
		fmt.Printf("testservice: waiting %v before listening\n", c.startupDelay)
		time.Sleep(c.startupDelay)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("TESTSERVICE_HOST"), port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testservice:", err)
		return 1
	}
	listening := time.Now()
	s := &service{cfg: c, children: children, healthyAt: listening.Add(c.healthyAfter), crash: make(chan struct{})}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("testservice: pid %d listening on %s\n", os.Getpid(), ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		fmt.Fprintln(os.Stderr, "testservice:", err)
		return 1
	case <-s.crash:
		fmt.Fprintf(os.Stderr, "testservice: crashing after %d requests as told\n", c.crashAfter)
		return 1
	case <-term:
		fmt.Println("testservice: SIGTERM, shutting down")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "testservice: shutdown:", err)
			return 1
		}
		return 0
	}
}

type service struct {
	cfg       config
	children  []int
	healthyAt time.Time
	served    atomic.Int64
	crash     chan struct{}
	crashOnce sync.Once
	sick      atomic.Int32 // 1: /healthz answers 500; 2: it never answers

	mu   sync.Mutex
	held [][]byte // what /alloc allocated
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/sicken":
		mode := int32(1)
		if r.URL.Query().Get("hang") == "1" {
			mode = 2
		}
		s.sick.Store(mode)
		fmt.Fprintln(w, "sick")
		return
	case "/healthz":
		switch s.sick.Load() {
		case 1:
			http.Error(w, "made unhealthy by /sicken", http.StatusInternalServerError)
			return
		case 2:
			<-r.Context().Done() // hangs until the prober gives up
			return
		}
		if time.Now().Before(s.healthyAt) {
			http.Error(w, "not yet healthy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
		return
	case "/env":
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		writeJSON(w, env)
		return
	case "/pids":
		pgid, _ := syscall.Getpgid(0)
		writeJSON(w, map[string]any{"pid": os.Getpid(), "pgid": pgid, "children": s.children})
		return
	case "/log":
		line := r.URL.Query().Get("line")
		if n, err := strconv.Atoi(r.URL.Query().Get("n")); err == nil && n > 0 && n <= 64<<20 {
			line = strings.Repeat("x", n)
		}
		count, err := strconv.Atoi(r.URL.Query().Get("count"))
		if err != nil || count < 1 || count > 10_000_000 {
			count = 1
		}
		out := bufio.NewWriter(os.Stdout)
		for range count {
			out.WriteString(line)
			out.WriteByte('\n')
		}
		out.Flush()
		fmt.Fprintln(w, "ok")
		return
	case "/alloc":
		n, err := strconv.Atoi(r.URL.Query().Get("mib"))
		if err != nil || n < 1 || n > 4096 {
			http.Error(w, "mib: want 1 to 4096", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for range n {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1 // touch every page: resident, not only reserved
			}
			s.held = append(s.held, b)
		}
		fmt.Fprintf(w, "%d MiB held\n", len(s.held))
		return
	case "/echo":
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d bytes\n", n)
		return
	}
	latency, cpu := s.cfg.latency, s.cfg.cpu
	if d, err := time.ParseDuration(r.URL.Query().Get("latency")); err == nil {
		latency = d
	}
	if d, err := time.ParseDuration(r.URL.Query().Get("cpu")); err == nil {
		cpu = d
	}
	burnCPU(cpu)
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	// With a Content-Length the flushed answer is complete, even if the
	// service then crashes before the handler returns.
	body := fmt.Sprintf("ok %d\n", os.Getpid())
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = io.WriteString(w, body)
	if n := s.served.Add(1); s.cfg.crashAfter > 0 && n >= s.cfg.crashAfter {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		s.crashOnce.Do(func() { close(s.crash) })
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// burnCPU spins until the calling thread has used d of CPU time (user +
// system), so a request costs the same CPU however loaded the machine is.
func burnCPU(d time.Duration) {
	if d <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, err := threadCPU()
	if err != nil {
		// No per-thread accounting: spin for wall time instead.
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
		return
	}
	x := uint64(1)
	for {
		for range 20000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		now, err := threadCPU()
		if err != nil || now-start >= d {
			break
		}
	}
	sink.Store(x)
}

var sink atomic.Uint64

const rusageThread = 1 // RUSAGE_THREAD on Linux

func threadCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
