package process

import (
	"bufio"
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzSpareRequest: reading a spare's request never panics, holds at most
// maxSpareRequest bytes, and what it accepts names a command and reads
// back the same when sent again.
func FuzzSpareRequest(f *testing.F) {
	f.Add([]byte(`{"path":"/bin/sh","argv":["sh","-c","exit 0"],"env":["A=1"],"dir":"/tmp"}` + "\n"))
	f.Add([]byte(`{"path":"/bin/sh","argv":["sh"]}` + "\nk"))
	f.Add([]byte(`{"path":"","argv":[]}` + "\n"))
	f.Add([]byte("not json\n"))
	f.Add([]byte(`{"path":"/x"`))
	f.Add([]byte(strings.Repeat("x", 5000) + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := readSpareRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		if req.Path == "" || len(req.Argv) == 0 {
			t.Fatalf("accepted %+v from %q", req, b)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		back, err := readSpareRequest(bufio.NewReader(bytes.NewReader(append(again, '\n'))))
		if err != nil || back.Path != req.Path || back.Dir != req.Dir || !slices.Equal(back.Argv, req.Argv) || !slices.Equal(back.Env, req.Env) {
			t.Fatalf("%+v read back as %+v, %v", req, back, err)
		}
	})
}
