// Command exact checks that tollgate never admits more than a bucket allows
// when its Redis store is slow or away, as an operator would try it: real
// `tollgate serve --store redis://…` processes, a throwaway redis-server,
// 64 HTTP clients on one key for 5 s, and CPU burners (`yes`) on the same
// cores. Each run uses a fresh key (a new account) of ECS cluster-read
// (50 burst, 20/s), so a run may admit at most 50 + 20 × elapsed + 1
// requests, elapsed being measured by the clients from before the first
// request to after the last answer.
//
// -fault stop pauses redis-server with SIGSTOP for -stop mid-run, then
// resumes it with SIGCONT. With -nodes 2 two servers share the Redis and
// the clients alternate between them; -store-nodes is passed to them as
// --store-nodes.
//
// It prints one line per run and a summary (admitted: min, median, max;
// decisions/s), and exits 1 if a run admitted more than -slack over the
// bound. Run it from the repository's root (bench/exact.sh builds tollgate
// and runs the cases of BENCHMARKS.md).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	tollgate   string
	runs       int
	clients    int
	duration   time.Duration
	burners    int
	nodes      int
	storeNodes int
	fault      string
	stopAt     time.Duration
	stop       time.Duration
	slack      int64
	serveArgs  string
	portBase   int
	serverCPUs string
}

func main() {
	var o options
	flag.StringVar(&o.tollgate, "tollgate", "", "path of the tollgate binary (required)")
	flag.IntVar(&o.runs, "runs", 20, "runs")
	flag.IntVar(&o.clients, "c", 64, "concurrent HTTP clients, all on one key")
	flag.DurationVar(&o.duration, "d", 5*time.Second, "duration of a run")
	flag.IntVar(&o.burners, "burners", 2, "CPU burners (yes > /dev/null) during the runs")
	flag.IntVar(&o.nodes, "nodes", 1, "tollgate servers sharing the Redis")
	flag.IntVar(&o.storeNodes, "store-nodes", 0, "--store-nodes for the servers (0: not passed)")
	flag.StringVar(&o.fault, "fault", "", "\"\" (none) or stop (SIGSTOP redis-server for -stop, then SIGCONT)")
	flag.DurationVar(&o.stopAt, "stop-at", 2*time.Second, "when in a run -fault strikes")
	flag.DurationVar(&o.stop, "stop", time.Second, "how long -fault stop lasts")
	flag.Int64Var(&o.slack, "slack", 0, "tokens a run may admit over the bound before the command fails")
	flag.StringVar(&o.serveArgs, "serve-args", "", "more flags for the servers, space-separated")
	flag.StringVar(&o.serverCPUs, "server-cpus", "", "run redis-server, the servers and the CPU burners on these CPUs (taskset -c LIST); run this command on others to keep its clients off them")
	flag.IntVar(&o.portBase, "port-base", 0, "listen on the first free ports of PORT..PORT+49 (redis-server's, then the servers'); 0: ports the kernel picks")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "exact:", err)
		os.Exit(1)
	}
}

const (
	capacity = 50 // ECS cluster-read
	perSec   = 20
)

func run(o options) error {
	if o.tollgate == "" || o.runs < 1 || o.clients < 1 || o.nodes < 1 || o.duration <= 0 {
		return errors.New("-tollgate is required; -runs, -c, -nodes and -d must be positive")
	}
	if o.fault != "" && o.fault != "stop" {
		return fmt.Errorf("-fault %q: want stop or nothing", o.fault)
	}
	ports := portRange{next: o.portBase, end: o.portBase + 50}
	port, err := ports.take()
	if err != nil {
		return err
	}
	redis := command(o.serverCPUs, "redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no")
	if err := redis.Start(); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	defer func() {
		redis.Process.Signal(syscall.SIGCONT)
		redis.Process.Kill()
		redis.Wait()
	}()
	if err := waitTCP(fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		return err
	}
	store := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	var urls []string
	var warnings []*atomic.Int64
	for range o.nodes {
		listen, err := ports.take()
		if err != nil {
			return err
		}
		args := []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", listen), "--store", store}
		if o.storeNodes > 0 {
			args = append(args, "--store-nodes", strconv.Itoa(o.storeNodes))
		}
		args = append(args, strings.Fields(o.serveArgs)...)
		url, warned, stop, err := spawn(command(o.serverCPUs, o.tollgate, args...))
		if err != nil {
			return err
		}
		defer stop()
		urls = append(urls, url)
		warnings = append(warnings, warned)
	}
	if o.storeNodes == 0 {
		if err := waitCounted(urls); err != nil {
			return err
		}
	}
	fmt.Printf("# %d run(s): %d node(s)%s, %d clients on one key, %v, %d CPU burners, fault %q (at %v for %v); bound = %d + %d/s × elapsed + 1\n",
		o.runs, o.nodes, storeNodesNote(o.storeNodes), o.clients, o.duration, o.burners, o.fault, o.stopAt, o.stop, capacity, perSec)
	var admitted, over []int64
	var rates []float64
	for i := range o.runs {
		burn := burners(o.burners, o.serverCPUs)
		r, err := once(o, urls, redis.Process, fmt.Sprintf("%012d", time.Now().UnixNano()%1e12))
		burn()
		if err != nil {
			return err
		}
		var warned int64
		for _, w := range warnings {
			warned += w.Swap(0)
		}
		bound := capacity + int64(r.elapsed/(time.Second/perSec)) + 1
		fmt.Printf("run %2d: admitted %4d of %6d decisions, bound %4d (%+d), elapsed %v, %6.0f decisions/s, %d server warnings, %d errors\n",
			i+1, r.admitted, r.decisions, bound, r.admitted-bound, r.elapsed.Round(time.Millisecond), r.rate(), warned, r.errors)
		admitted = append(admitted, r.admitted)
		over = append(over, r.admitted-bound)
		rates = append(rates, r.rate())
		time.Sleep(200 * time.Millisecond)
	}
	slices.Sort(admitted)
	slices.Sort(rates)
	worst := slices.Max(over)
	within := 0
	for _, v := range over {
		if v <= 0 {
			within++
		}
	}
	fmt.Printf("summary: %d/%d runs within the bound; admitted min %d, median %d, max %d; worst over the bound %+d; decisions/s min %.0f, median %.0f, max %.0f\n",
		within, len(over), admitted[0], admitted[len(admitted)/2], admitted[len(admitted)-1], worst, rates[0], rates[len(rates)/2], rates[len(rates)-1])
	if worst > o.slack {
		return fmt.Errorf("a run admitted %d over the bound (slack %d)", worst, o.slack)
	}
	return nil
}

// waitCounted waits until every node shares its buckets among all of
// them (tollgate_store_nodes): without --store-nodes the nodes count each
// other in Redis, a node started first seeing the others within 2 s.
func waitCounted(urls []string) error {
	want := fmt.Sprintf("\ntollgate_store_nodes %d\n", len(urls))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		counted := 0
		for _, u := range urls {
			resp, err := http.Get(u + "/metrics")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
			resp.Body.Close()
			if strings.Contains(string(b), want) {
				counted++
			}
		}
		if counted == len(urls) {
			return nil
		}
	}
	return fmt.Errorf("the %d nodes did not all count each other in Redis within 30 s (tollgate_store_nodes)", len(urls))
}

func storeNodesNote(n int) string {
	if n == 0 {
		return " counting each other"
	}
	return fmt.Sprintf(" with --store-nodes %d", n)
}

type result struct {
	admitted, decisions, errors int64
	elapsed                     time.Duration
}

func (r result) rate() float64 { return float64(r.decisions) / r.elapsed.Seconds() }

// once runs the clients for o.duration on one fresh account's key.
func once(o options, urls []string, redis *os.Process, account string) (result, error) {
	body := `{"service":"ecs","account":"` + account + `","region":"us-east-1","action":"DescribeClusters"}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.clients, MaxConnsPerHost: o.clients}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var admitted, decisions, errs atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	var deadline time.Time
	for g := range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := urls[g%len(urls)] + "/v1/take"
			<-start
			for time.Now().Before(deadline) {
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					errs.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					admitted.Add(1)
					decisions.Add(1)
				case http.StatusTooManyRequests:
					decisions.Add(1)
				default:
					errs.Add(1)
				}
			}
		}()
	}
	t0 := time.Now()
	deadline = t0.Add(o.duration)
	close(start)
	if o.fault == "stop" {
		time.Sleep(o.stopAt)
		redis.Signal(syscall.SIGSTOP)
		time.Sleep(o.stop)
		redis.Signal(syscall.SIGCONT)
	}
	wg.Wait()
	return result{admitted: admitted.Load(), decisions: decisions.Load(), errors: errs.Load(), elapsed: time.Since(t0)}, nil
}

// burners starts n `yes` processes writing to /dev/null and returns a
// function that kills them.
func burners(n int, cpus string) func() {
	var cmds []*exec.Cmd
	for range n {
		c := command(cpus, "yes") // stdout nil: /dev/null
		if c.Start() == nil {
			cmds = append(cmds, c)
		}
	}
	return func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
}

// command is exec.Command(name, args...), on cpus when they are given
// (taskset sets the affinity and execs name: the pid is name's).
func command(cpus, name string, args ...string) *exec.Cmd {
	if cpus == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("taskset", append([]string{"-c", cpus, name}, args...)...)
}

// spawn starts a tollgate server (cmd: `tollgate serve ...`) and returns
// its base URL, a count of its "redis store unavailable" warnings, and a
// function that stops it.
func spawn(cmd *exec.Cmd) (string, *atomic.Int64, func(), error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, nil, err
	}
	addrRe := regexp.MustCompile(`msg=listening addr=(\S+)`)
	found := make(chan string, 1)
	warned := new(atomic.Int64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if m := addrRe.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
			if strings.Contains(line, "redis store unavailable") {
				warned.Add(1)
			}
		}
	}()
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	select {
	case addr := <-found:
		return "http://" + addr, warned, stop, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return "", nil, nil, errors.New("tollgate serve did not report its address")
	}
}

// portRange hands out loopback ports free to listen on: the first free
// ones of [next, end), in order; with next 0, ones the kernel picks.
type portRange struct{ next, end int }

func (r *portRange) take() (int, error) {
	if r.next == 0 {
		return freePort(0)
	}
	for ; r.next < r.end; r.next++ {
		if p, err := freePort(r.next); err == nil {
			r.next++
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port left below %d (-port-base)", r.end)
}

// freePort returns port if it is free to listen on on the loopback
// interface, or with port 0 a free one the kernel picks.
func freePort(port int) (int, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitTCP(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server at %s did not start", addr)
}
