package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
)

// The program, run against a real gateway whose buckets stand still (a
// fake clock), sees exactly the 50-token burst and then the throttle.
func TestRunAgainstGateway(t *testing.T) {
	clock := limitertest.NewClock()
	g, err := gateway.New(gateway.Options{Limiter: memory.New(memory.Options{Now: clock.Now})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	var out bytes.Buffer
	if err := run(context.Background(), srv.URL, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "call 51: ThrottlingException (Rate exceeded)\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}
