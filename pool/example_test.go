package pool_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
)

// inProcess runs each instance as an HTTP server inside this process. Real
// services use package pool/process, which starts the configured command.
type inProcess struct{}

type server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

func (inProcess) Start(ctx context.Context, spec pool.InstanceSpec) (pool.Instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s, path %s", spec.Revision, r.URL.Path)
	})}
	go func() { s.srv.Serve(ln); close(s.done) }()
	return s, nil
}

func (s *server) Addr() string                   { return s.ln.Addr().String() }
func (s *server) Ready(context.Context) error    { return nil }
func (s *server) Done() <-chan struct{}          { return s.done }
func (s *server) Err() error                     { return nil }
func (s *server) CPUTime() (time.Duration, bool) { return 0, false }
func (s *server) PID() int                       { return 0 }
func (s *server) Stop(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	s.srv.Shutdown(ctx)
	<-s.done
	return nil
}

// Example runs one autoscaled service: the first request starts an
// instance (scale from zero), waits until it is ready and is proxied to
// it; cancelling Run's context stops every instance.
func Example() {
	p := pool.New(pool.Options{})
	err := p.Apply([]pool.ServiceSpec{{
		Name:   "hello",
		Runner: inProcess{},
		Engine: autoscale.Config{MaxInstances: 3, IdleTimeout: time.Minute},
	}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()

	rec := httptest.NewRecorder()
	p.Handler("hello").ServeHTTP(rec, httptest.NewRequest("GET", "/greet", nil))
	body, _ := io.ReadAll(rec.Body)
	fmt.Println(rec.Code, string(body))
	fmt.Println("instances:", len(p.Status()[0].Instances))

	cancel()
	<-done
	// Output:
	// 200 hello from hello-00001, path /greet
	// instances: 1
}
