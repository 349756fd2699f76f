package process_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
)

// A runner starts instances of one command; each gets its own PORT and
// the K_* variables of Cloud Run, is ready once its readiness check
// passes, and stops with SIGTERM, a grace period, then SIGKILL.
func Example() {
	bin, err := testservice.Path() // an HTTP service honouring PORT
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := process.New(process.Options{
		Command:   bin,
		Env:       []string{"GREETING=hello"},
		Readiness: process.Readiness{Path: "/healthz", Timeout: time.Minute},
		StopGrace: 10 * time.Second,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	inst, err := r.Start(ctx, pool.InstanceSpec{Service: "hello", Revision: "hello-00001", ID: "a1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := inst.Ready(ctx); err != nil {
		fmt.Println(err)
		return
	}
	resp, err := http.Get("http://" + inst.Addr() + "/healthz")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	fmt.Println(inst.Stop(10*time.Second), inst.Err())
	// Output:
	// 200 OK
	// <nil> <nil>
}

// A command that does not exist is an error from New, so a config loader
// reports it at start and on reload.
func ExampleNew() {
	_, err := process.New(process.Options{Command: "/nonexistent/hello"})
	fmt.Println(errors.Is(err, process.ErrCommand))
	fmt.Println(err)
	// Output:
	// true
	// command: command is not an executable file: /nonexistent/hello does not exist
}
