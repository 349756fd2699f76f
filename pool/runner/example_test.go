package runner_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/pool/runner"
)

// inProcess is a Runner whose instances are HTTP servers in this process;
// package pool/process starts the configured command instead.
type inProcess struct{}

func (inProcess) Start(_ context.Context, spec runner.InstanceSpec) (runner.Instance, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", spec.ID)
	}))
	return &served{srv: srv, done: make(chan struct{})}, nil
}

// served is one instance of inProcess: ready as soon as it listens.
type served struct {
	srv  *httptest.Server
	done chan struct{}
	once sync.Once
}

func (s *served) Addr() string                   { return strings.TrimPrefix(s.srv.URL, "http://") }
func (s *served) Ready(context.Context) error    { return nil }
func (s *served) Done() <-chan struct{}          { return s.done }
func (s *served) Err() error                     { return nil }
func (s *served) CPUTime() (time.Duration, bool) { return 0, false }
func (s *served) PID() int                       { return 0 }
func (s *served) Stop(time.Duration) error {
	s.once.Do(func() { s.srv.Close(); close(s.done) })
	return nil
}

// A Runner's life of one instance, as the pool drives it: start, wait
// until ready, send it requests at its address, stop it.
func Example() {
	var r runner.Runner = inProcess{}
	in, err := r.Start(context.Background(), runner.InstanceSpec{Service: "hello", Revision: "hello-00001", ID: "hello-00001-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := in.Ready(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	resp, err := http.Get("http://" + in.Addr() + "/")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	in.Stop(time.Second)
	<-in.Done()
	fmt.Println("exited:", in.Err())
	// Output:
	// 200 hello from hello-00001-1
	// exited: <nil>
}
