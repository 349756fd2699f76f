package process_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/pooltest"
	"github.com/tollgate/tollgate/pool/process"
)

// rawEnviron is the environment process pid was given, in order, with
// any duplicate keys (getenv returns the first).
func rawEnviron(t *testing.T, pid int) [][]byte {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0})
}

// TestSpareEnvLikeFresh: an Env entry that overrides an inherited
// variable (TZ here, PATH or HOME in production), and a value that is not
// UTF-8, reach an instance started by the spare as they reach a fresh one.
func TestSpareEnvLikeFresh(t *testing.T) {
	t.Setenv("TZ", "Europe/Paris") // inherited by instances
	t.Run("override", func(t *testing.T) { spareEnvLikeFresh(t, []string{"TZ=UTC"}, true) })
	// Not UTF-8: the spare may be passed over, but the bytes must arrive.
	t.Run("latin1", func(t *testing.T) { spareEnvLikeFresh(t, []string{"TZ=UTC", "LATIN1=caf\xe9"}, false) })
}

func spareEnvLikeFresh(t *testing.T, env []string, onSpare bool) {
	bin := testservice.Build(t)
	r := newRunner(t, process.Options{
		Command:    "./" + filepath.Base(bin),
		Dir:        filepath.Dir(bin),
		Env:        env,
		NoCgroup:   true,
		Supervisor: supervisor(t),
	})
	t.Cleanup(func() { _ = r.Close() })
	start := func(id string) pool.Instance {
		inst, err := r.Start(t.Context(), pool.InstanceSpec{Service: "svc", Revision: "svc-1", ID: id})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() { _ = inst.Stop(time.Second) })
		pooltest.Ready(t, inst)
		return inst
	}
	fresh := start("fresh")
	spare := waitSpare(t, r, 0)
	warm := start("warm")
	if onSpare && ppid(warm.PID()) != spare {
		t.Fatalf("not started by the spare")
	}
	for name, inst := range map[string]pool.Instance{"fresh": fresh, "spare": warm} {
		var tz [][]byte
		latin1 := false
		for _, kv := range rawEnviron(t, inst.PID()) {
			if bytes.HasPrefix(kv, []byte("TZ=")) {
				tz = append(tz, kv)
			}
			latin1 = latin1 || bytes.Equal(kv, []byte("LATIN1=caf\xe9"))
		}
		if len(tz) != 1 || string(tz[0]) != "TZ=UTC" {
			t.Errorf("%s instance: TZ entries %q, want just TZ=UTC (getenv returns the first)", name, tz)
		}
		if !latin1 && len(env) > 1 {
			t.Errorf("%s instance: LATIN1 is not caf\\xe9", name)
		}
	}
}
