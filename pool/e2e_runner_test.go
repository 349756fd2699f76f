package pool_test

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
)

// testLog logs to stderr with -v, else nowhere.
func testLog(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil)).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// testRunner runs the test service with env (KEY=value) added.
func testRunner(t *testing.T, env ...string) pool.Runner {
	t.Helper()
	r, err := process.New(process.Options{
		Command:   testservice.Build(t),
		Env:       append([]string{testservice.EnvHost + "=127.0.0.1"}, env...),
		Readiness: process.Readiness{Timeout: time.Minute},
		StopGrace: 10 * time.Second,
		Logger:    testLog(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
