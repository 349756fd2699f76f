package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/retry"
)

// The program runs to the end against a real gateway on the real clock:
// every throttled call is retried until its bucket refills. The waits are
// shortened (1 ms unit, 100 ms cap, hints clamped to it) so the test takes
// well under a second on a quiet machine; nothing asserts how long it takes
// or how many retries it needed, only that every call ends in success.
func TestRunAgainstGateway(t *testing.T) {
	g, err := gateway.New(gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err = run(ctx, srv.URL, &out, retry.WithUnit(time.Millisecond), retry.WithMaxBackoff(100*time.Millisecond))
	if err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{
		"take 50: 200 OK\n",
		"take 1: 200 OK\n",
		"retry.Do: 60 DescribeClusters calls succeeded\n",
		"awsretry: 60 DescribeClusters calls succeeded\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
