// Command door measures what clients that cannot sign do to a tenant that
// can, against a running `tollgate serve --credentials`: a tenant signing
// DescribeClusters at a paced rate from 127.0.0.1 is measured quiet, then
// beside each attack of issue 36 in turn, and each phase reports the
// share of its calls answered 200 and its latency percentiles, with p99
// as a multiple of the quiet phase's.
//
//	go run ./bench/door -url http://127.0.0.1:8080 -key AKID -secret SECRET
//
// The attacks (loopback's 127.0.0.0/8 gives each attacker address its own
// source IP; tollgate trusts no X-Forwarded-For):
//
//   - slow40, slow1000: 40 or 1,000 connections from 127.0.0.2, each an
//     AWS request with an Authorization header (a key the server does not
//     hold) and a Content-Length of -slow-length, then a byte a second,
//     reconnecting as they are cut;
//   - crowd1000: the same from 1,000 addresses, one connection each;
//   - badsigner: 8 unthrottled workers on the tenant's own address,
//     signing with made-up keys and, with -other, with another key of the
//     server's and a wrong secret;
//   - rotating: 8 workers cycling through 10,000 addresses, a new
//     connection each, signing with the tenant's key id and a wrong
//     secret (its key is then failing everywhere).
//
// Each attack runs in a process of its own (this command again, with
// -attack), as an attacker elsewhere would: the tenant's process then
// measures the server, not its own scheduling of the attacker's
// goroutines. With -server-pid, each phase reports the CPU time the
// server used in it.
//
// bench/door.sh starts the server and runs every phase.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

type options struct {
	url, key, secret, other string
	d                       time.Duration
	rate                    float64
	phases                  string
	slowLength              int
	attack                  string // run only this attack, until SIGINT (the child process)
	serverPID               int
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "http://127.0.0.1:8080", "the server")
	flag.StringVar(&o.key, "key", "", "the tenant's access key id")
	flag.StringVar(&o.secret, "secret", "", "its secret")
	flag.StringVar(&o.other, "other", "", "another key id of the server's, for badsigner's wrong signatures (default: made-up keys only)")
	flag.DurationVar(&o.d, "d", 20*time.Second, "duration of each phase")
	flag.Float64Var(&o.rate, "rate", 100, "the tenant's calls a second")
	flag.StringVar(&o.phases, "phases", "quiet,slow40,slow1000,crowd1000,badsigner,rotating", "the phases, in order; p99/q is against the last quiet phase before (quiet runs first if not named first; name it again between attacks to interleave)")
	flag.IntVar(&o.slowLength, "slow-length", 500000, "the Content-Length the slow bodies declare (tollgate's ECS bound is 512 KiB; the issue's attack declared 1048576)")
	flag.StringVar(&o.attack, "attack", "", "run only this attack until interrupted, and print its note (how the tenant's process runs each attack)")
	flag.IntVar(&o.serverPID, "server-pid", 0, "the server's pid, to report the CPU time it used in each phase (from /proc)")
	flag.Parse()
	if o.attack != "" {
		attack, ok := attacks(o)[o.attack]
		if !ok {
			fmt.Fprintf(os.Stderr, "door: unknown attack %q\n", o.attack)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		fmt.Println(attack(ctx))
		return
	}
	if o.key == "" || o.secret == "" {
		fmt.Fprintln(os.Stderr, "door: give -key and -secret (a key of the server's credentials file)")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "door:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	tenant := clientFrom("127.0.0.1", true)
	if status, code := call(tenant, signedCall(o.url, o.key, o.secret)); status != http.StatusOK {
		return fmt.Errorf("the tenant's first call: %d %s", status, code)
	}
	var quietP99 time.Duration
	fmt.Printf("%-10s %9s %8s %9s %9s %9s %8s  %s\n", "phase", "answered", "share", "p50", "p99", "max", "p99/q", "other answers")
	phases := strings.Split(o.phases, ",")
	if phases[0] != "quiet" {
		phases = append([]string{"quiet"}, phases...)
	}
	for _, phase := range phases {
		if _, ok := attacks(o)[phase]; !ok {
			return fmt.Errorf("unknown phase %q", phase)
		}
		child, out, err := startAttack(o, phase)
		if err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // the attack takes hold
		cpu0 := serverCPU(o.serverPID)
		res := measure(o, tenant)
		cpu := serverCPU(o.serverPID) - cpu0
		child.Process.Signal(os.Interrupt)
		child.Wait()
		note := strings.TrimSpace(out.String())
		if o.serverPID > 0 {
			note += fmt.Sprintf("; server CPU %.2f s", cpu.Seconds())
		}
		p50, p99, worst := res.pct(0.50), res.pct(0.99), res.pct(1)
		if phase == "quiet" {
			quietP99 = p99
		}
		fmt.Printf("%-10s %4d/%-4d %7.2f%% %9v %9v %9v %7.2fx  %v; %d calls on new connections, longest connect %v; %s\n", phase, res.ok, res.total, 100*float64(res.ok)/float64(max(res.total, 1)),
			p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), worst.Round(10*time.Microsecond), float64(p99)/float64(max(quietP99, 1)), res.others,
			res.fresh, res.dial.Round(time.Millisecond), note)
		time.Sleep(2 * time.Second) // the server settles
	}
	return nil
}

// startAttack runs the attack of phase in a child process (this command
// with -attack), whose note out holds once it has exited.
func startAttack(o options, phase string) (*exec.Cmd, *bytes.Buffer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	out := new(bytes.Buffer)
	cmd := exec.Command(self, "-attack", phase, "-url", o.url, "-key", o.key, "-secret", o.secret,
		"-other", o.other, "-slow-length", strconv.Itoa(o.slowLength))
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("attack %s: %w", phase, err)
	}
	return cmd, out, nil
}

// serverCPU is the CPU time (user and system) process pid has used, from
// /proc/pid/stat; 0 without a pid.
func serverCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 12th and 13th of them, in clock ticks (100 a second).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// result is one phase's tenant calls.
type result struct {
	mu      sync.Mutex
	lat     []time.Duration
	ok      int
	total   int
	others  map[string]int
	started time.Time
	fresh   int           // calls on a new connection
	dial    time.Duration // the longest connection set-up of those
}

func (r *result) pct(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	return r.lat[min(len(r.lat)-1, int(q*float64(len(r.lat))))]
}

// measure makes the tenant's calls at o.rate for o.d (open loop: a call
// starts on time whether or not the last has answered), through c.
func measure(o options, c *http.Client) *result {
	res := &result{others: map[string]int{}, started: time.Now()}
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
	defer tick.Stop()
	end := time.After(o.d)
	var wg sync.WaitGroup
	for {
		select {
		case <-end:
			wg.Wait()
			return res
		case <-tick.C:
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				var connStart, connDone time.Time
				trace := &httptrace.ClientTrace{
					ConnectStart: func(string, string) { connStart = time.Now() },
					ConnectDone:  func(string, string, error) { connDone = time.Now() },
				}
				r := signedCall(o.url, o.key, o.secret)
				status, code := call(c, r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
				d := time.Since(start)
				res.mu.Lock()
				defer res.mu.Unlock()
				if !connStart.IsZero() {
					res.fresh++
					res.dial = max(res.dial, connDone.Sub(connStart))
				}
				res.total++
				res.lat = append(res.lat, d)
				if status == http.StatusOK {
					res.ok++
				} else {
					res.others[fmt.Sprint(status, " ", code)]++
				}
			}()
		}
	}
}

// attacks are the phases by name; each runs until ctx ends and returns a
// note on what it did.
func attacks(o options) map[string]func(ctx context.Context) string {
	one := func(int) string { return "127.0.0.2" }
	return map[string]func(ctx context.Context) string{
		"quiet":     func(ctx context.Context) string { <-ctx.Done(); return "" },
		"slow40":    func(ctx context.Context) string { return slowBodies(ctx, o.url, 40, o.slowLength, one) },
		"slow1000":  func(ctx context.Context) string { return slowBodies(ctx, o.url, 1000, o.slowLength, one) },
		"crowd1000": func(ctx context.Context) string { return slowBodies(ctx, o.url, 1000, o.slowLength, loopback(2)) },
		"badsigner": func(ctx context.Context) string {
			c := clientFrom("127.0.0.1", true)
			return flood(ctx, 8, func(int) *http.Client { return c }, func(i int) *http.Request {
				if o.other != "" && i%2 == 0 {
					return signedCall(o.url, o.other, "wrong-secret")
				}
				return signedCall(o.url, fmt.Sprintf("AKIDMADEUP%d", i), "x")
			})
		},
		"rotating": func(ctx context.Context) string {
			addr := loopback(10)
			return flood(ctx, 8, func(i int) *http.Client { return clientFrom(addr(i%10000), false) }, func(int) *http.Request {
				return signedCall(o.url, o.key, "wrong-secret")
			})
		},
	}
}

// loopback numbers addresses of 127.0.0.0/8 from 127.<first>.0.1.
func loopback(first int) func(int) string {
	return func(i int) string { return fmt.Sprintf("127.%d.%d.%d", first+i/(250*250), i/250%250, 1+i%250) }
}

func clientFrom(local string, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64, DisableKeepAlives: !keepAlive}}
}

func signedCall(url, key, secret string) *http.Request {
	body := []byte(`{}`)
	r, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	r.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.DescribeClusters")
	sum := sha256.Sum256(body)
	v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret},
		r, hex.EncodeToString(sum[:]), "ecs", "us-east-1", time.Now())
	return r
}

func call(c *http.Client, r *http.Request) (int, string) {
	resp, err := c.Do(r)
	if err != nil {
		return 0, "error"
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Amzn-Errortype")
}

// flood runs workers sending req(i) through client(i) as fast as they are
// answered, and returns the answers by code.
func flood(ctx context.Context, workers int, client func(int) *http.Client, req func(int) *http.Request) string {
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1))
				_, code := call(client(i), req(i).WithContext(ctx))
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return fmt.Sprintf("attacker: %d requests %v", next.Load(), codes)
}

// slowBodies keeps conns slow-body connections from the addresses
// local(i), each reconnecting 100 ms after it is answered or cut.
func slowBodies(ctx context.Context, url string, conns, length int, local func(int) string) string {
	var cut, sent atomic.Int64
	var wg sync.WaitGroup
	host := strings.TrimPrefix(url, "http://")
	now := time.Now().UTC()
	head := "POST / HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/x-amz-json-1.1" +
		"\r\nX-Amz-Target: AmazonEC2ContainerServiceV20141113.DescribeClusters" +
		"\r\nX-Amz-Date: " + now.Format("20060102T150405Z") +
		"\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKIDSLOWLORIS/" + now.Format("20060102") +
		"/us-east-1/ecs/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("0", 64) +
		"\r\nContent-Length: " + fmt.Sprint(length) + "\r\n\r\n"
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local(i))}}
			for ctx.Err() == nil {
				slowBody(ctx, d, host, head, &cut, &sent)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	return fmt.Sprintf("slow bodies: %d connections, %d answered or cut, %d body bytes sent", conns, cut.Load(), sent.Load())
}

func slowBody(ctx context.Context, d *net.Dialer, host, head string, cut, sent *atomic.Int64) {
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		var b [1]byte
		conn.Read(b[:])
	}()
	defer func() { conn.Close(); <-answered }()
	if _, err := io.WriteString(conn, head); err != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-answered:
			cut.Add(1)
			return
		case <-time.After(time.Second):
			if _, err := conn.Write([]byte{'{'}); err != nil {
				cut.Add(1)
				return
			}
			sent.Add(1)
		}
	}
}
