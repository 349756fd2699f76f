package revision_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/revision"
	"github.com/tollgate/tollgate/pool/runner"
)

// greeter is a runner.Runner whose instances are HTTP servers in this
// process; package pool/process starts the configured command instead.
type greeter struct{}

func (greeter) Start(_ context.Context, spec runner.InstanceSpec) (runner.Instance, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", spec.Revision)
	}))
	return &instance{srv: srv, done: make(chan struct{})}, nil
}

// instance is one of greeter's: ready as soon as it listens.
type instance struct {
	srv  *httptest.Server
	done chan struct{}
	once sync.Once
}

func (s *instance) Addr() string                   { return strings.TrimPrefix(s.srv.URL, "http://") }
func (s *instance) Ready(context.Context) error    { return nil }
func (s *instance) Done() <-chan struct{}          { return s.done }
func (s *instance) Err() error                     { return nil }
func (s *instance) CPUTime() (time.Duration, bool) { return 0, false }
func (s *instance) PID() int                       { return 0 }
func (s *instance) Stop(time.Duration) error {
	s.once.Do(func() { s.srv.Close(); close(s.done) })
	return nil
}

// One revision on its own: the first request starts an instance (scale
// from zero) and is proxied to it once it is ready; State is what the
// pool's traffic moves read; cancelling Run's context stops the instance.
func Example() {
	rv, err := revision.New(revision.Options{
		Service: "hello", Name: "hello-00001", Runner: greeter{},
		Config: autoscale.Config{MaxInstances: 2},
		Limits: revision.Limits{RequestTimeout: time.Minute, MaxPending: 100, StopGrace: time.Second},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	go rv.Run(ctx)

	rec := httptest.NewRecorder()
	rv.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	fmt.Println(rec.Code, rec.Body.String())
	st := rv.State()
	fmt.Println("ready:", st.Ready, "of at most", st.MaxInstances)

	cancel()
	<-rv.Done()
	// Output:
	// 200 hello from hello-00001
	// ready: 1 of at most 2
}
