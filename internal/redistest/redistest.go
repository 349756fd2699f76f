// Package redistest runs throwaway redis-server processes for tests.
//
// [Start] launches redis-server on 127.0.0.1 at a free port, with no
// persistence, waits until it answers PING, and kills it when the test ends.
// [StartTLS] starts one that speaks only TLS.
// When redis-server is not installed the test is skipped with a message
// saying so, unless the environment sets TOLLGATE_REQUIRE_REDIS=1 (as CI
// does): then the test fails.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RequireEnv is the environment variable that turns a missing redis-server
// from a skip into a failure when set to 1.
const RequireEnv = "TOLLGATE_REQUIRE_REDIS"

// Server is a redis-server process owned by one test.
type Server struct {
	// Addr is the server's host:port on the loopback interface. It stays
	// the same across Stop and Restart.
	Addr string

	tb      testing.TB
	bin     string
	dir     string
	cluster bool
	tls     *TLS // nil for plaintext

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error // receives the exit of cmd
}

// Start starts a redis-server for tb and stops it in tb.Cleanup. It skips
// tb when redis-server is not installed (fails when TOLLGATE_REQUIRE_REDIS=1).
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, false, nil)
}

// StartCluster is like [Start] but runs a Redis Cluster of one node owning
// all 16384 slots: a cluster client works against it, and it refuses
// script calls whose keys span several slots, as a real cluster does.
// Restart brings it back as a cluster.
func StartCluster(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, true, nil)
}

// TLS are the PEM files of a server started with [StartTLS].
type TLS struct {
	// Cert and Key are the server's certificate and its key.
	Cert, Key string
	// CA is the CA the server's certificate chains to, and the one a
	// client's certificate must chain to (tls-ca-cert-file).
	CA string
	// ClientCert and ClientKey, when set, make the server require a
	// client certificate (tls-auth-clients yes); its readiness check
	// presents them. Without them clients need none.
	ClientCert, ClientKey string
}

// StartTLS is like [Start] but the server speaks only TLS, with the
// certificate of files, on Addr; URL returns a rediss:// URL.
func StartTLS(tb testing.TB, files TLS) *Server {
	tb.Helper()
	return start(tb, false, &files)
}

func start(tb testing.TB, cluster bool, tlsFiles *TLS) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not found in PATH: install Redis (apt-get install redis-server) to run the Redis store tests"
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s; %s=1 requires it", msg, RequireEnv)
		}
		tb.Skipf("%s, or set %s=1 to fail instead of skipping", msg, RequireEnv)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), cluster: cluster, tls: tlsFiles}
	tb.Cleanup(s.Stop)
	var last error
	for range 5 { // another process may take the free port first
		port, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: finding a free port: %v", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if last = s.start(); last == nil {
			return s
		}
	}
	tb.Fatalf("redistest: %v", last)
	return nil
}

// URL returns the redis:// URL of the server; rediss:// with TLS.
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr
	}
	return "redis://" + s.Addr
}

// Stop kills the server, as a crash would, and waits for it to exit. The
// port is free afterwards. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Pause stops the server with SIGSTOP, as a hung or swapped-out server
// would: connections are accepted by the kernel, and nothing answers. Its
// data is kept. Resume continues it; Stop and the test's end kill it
// paused or not.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.tb.Fatalf("redistest: %v to a stopped server", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("redistest: %v: %v", sig, err)
	}
}

// Restart starts a stopped server again on the same port, empty, and waits
// until it answers PING.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	var err error
	// The port may linger briefly after the kill; a loaded machine may
	// take long to start the server.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restarting on %s: %v", s.Addr, err)
}

func (s *Server) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	args := []string{
		"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--loglevel", "warning",
	}
	if t := s.tls; t != nil {
		auth := "no"
		if t.ClientCert != "" {
			auth = "yes"
		}
		args[1] = "0" // no plaintext port
		args = append(args, "--tls-port", port, "--tls-cert-file", t.Cert, "--tls-key-file", t.Key,
			"--tls-ca-cert-file", t.CA, "--tls-auth-clients", auth)
	}
	if s.cluster {
		conf := filepath.Join(s.dir, "nodes-"+port+".conf")
		_ = os.Remove(conf) // restart empty, as without persistence
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", conf)
	}
	cmd := exec.Command(s.bin, args...)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Generous: a machine with a load average of 8 may take seconds.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server on %s exited (%v): %s", s.Addr, err, logs.String())
		default:
		}
		if s.ping(cmd.Process.Pid) == nil {
			if s.cluster {
				if err := claimSlots(s.Addr); err != nil {
					_ = cmd.Process.Kill()
					<-exited
					return err
				}
			}
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return errors.New("redis-server on " + s.Addr + " did not answer PING within 30s: " + logs.String())
}

// ping checks that the server at s.Addr answers PING and is process pid,
// not another test's server that took the port first.
func (s *Server) ping(pid int) error {
	addr := s.Addr
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if s.tls != nil {
		cfg, err := s.tls.clientConfig()
		if err != nil {
			return err
		}
		tc := tls.Client(c, cfg)
		defer tc.Close()
		c = tc
	}
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\nINFO server\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	if line, err = r.ReadString('\n'); err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if err != nil || n < 0 {
		return fmt.Errorf("INFO answered %q", line)
	}
	info := make([]byte, n+2)
	if _, err := io.ReadFull(r, info); err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	if !strings.Contains(string(info), want) {
		return fmt.Errorf("%s is another redis-server than process %d", addr, pid)
	}
	return nil
}

// clientConfig is the TLS configuration of the readiness check.
func (t *TLS) clientConfig() (*tls.Config, error) {
	ca, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("redistest: no certificate in %s", t.CA)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if t.ClientCert != "" {
		pair, err := tls.LoadX509KeyPair(t.ClientCert, t.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// claimSlots gives the one-node cluster at addr every slot and waits until
// it reports the cluster healthy.
func claimSlots(addr string) error {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		return fmt.Errorf("claiming cluster slots on %s: %w", addr, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("cluster on %s not ok within 30s", addr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ClosedAddr returns a loopback host:port that refuses connections until
// tb ends: a TCP socket bound there and never listening holds the port, so
// no other test or process can start a server on it meanwhile (as one
// could on a port picked free and let go).
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("redistest: socket: %v", err)
	}
	tb.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("redistest: binding a closed port: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("redistest: getsockname: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
