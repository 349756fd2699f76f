package replay

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseAccessLine(t *testing.T) {
	at := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixNano()
	}
	for _, tc := range []struct {
		line string
		f    AccessFormat
		want Request
	}{
		{`203.0.113.7 - - [30/Nov/2026:12:00:01 +0000] "GET /hello/x?y=1 HTTP/1.1" 200 512 "-" "curl/8" 0.250`, Combined,
			Request{At: at("2026-11-30T12:00:00.75Z"), Service: 250 * time.Millisecond, Path: "/hello/x"}},
		{`203.0.113.7 - - [30/Nov/2026:13:00:01 +0100] "POST /a HTTP/1.1" 201 5 2`, Combined,
			Request{At: at("2026-11-30T11:59:59Z"), Service: 2 * time.Second, Path: "/a"}},
		{`https 2026-11-30T12:00:01.500000Z app/lb/1 1.2.3.4:5 10.0.0.1:80 0.001 0.300 0.100 200 200 34 366 "GET https://api.example.com:443/v1/x?q HTTP/1.1" "ua" - - arn "Root=1" "api.example.com" "-" 0 2026-11-30T12:00:01.099000Z`, ALB,
			Request{At: at("2026-11-30T12:00:01.1Z"), Service: 300 * time.Millisecond, Host: "api.example.com", Path: "/v1/x"}},
		{`[2026-11-30T12:00:00.310Z] "GET /hello HTTP/2" 200 - 0 12 57 55 "-" "ua" "id" "Hello.Example.com:8443" "10.0.0.1:80"`, Envoy,
			Request{At: at("2026-11-30T12:00:00.31Z"), Service: 57 * time.Millisecond, Host: "Hello.Example.com", Path: "/hello"}},
	} {
		if got := DetectAccessFormat([]byte(tc.line)); got != tc.f {
			t.Errorf("detect %q: %q, want %q", tc.line, got, tc.f)
		}
		got, err := ParseAccessLine([]byte(tc.line), tc.f)
		if err != nil || got != tc.want {
			t.Errorf("%q:\n got %+v, %v\nwant %+v", tc.line, got, err, tc.want)
		}
	}
}

func TestAccessLineSkips(t *testing.T) {
	for _, tc := range []struct{ line, why string }{
		{`https 2026-11-30T12:00:01Z app/lb/1 1.2.3.4:5 - -1 -1 -1 503 - 34 366 "GET https://a.example.com:443/ HTTP/1.1" "ua"`, "processing time -1"},
		{`1.2.3.4 - - [30/Nov/2026:12:00:01 +0000] "GET / HTTP/1.1" 200 5 "-" "ua" -`, "request time"},
		{`1.2.3.4 - - [30/Nov/2026:12:00:01 +0000] "GET / HTTP/1.1" 200 5 "-" "ua" 100000`, "more than 24h"},
		{`1.2.3.4 - - [yesterday] "GET / HTTP/1.1" 200 5 "-" "ua" 0.1`, "time"},
		{`[2026-11-30T12:00:00.310Z] "-" 400 - 0 12 5`, "request line"},
		{`[2026-11-30T12:00:00.310Z] "GET / HTTP/1.1" 200`, "too few fields"},
	} {
		f := DetectAccessFormat([]byte(tc.line))
		if _, err := ParseAccessLine([]byte(tc.line), f); err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%q (%s): %v, want %q", tc.line, f, err, tc.why)
		}
	}
}

// TestAccessDecoder reads a gzipped log with a blank line, a line in no
// format, a line too long and a line of another format than the file's.
func TestAccessDecoder(t *testing.T) {
	log := "\n" +
		"garbage\n" +
		`[2026-11-30T12:00:00.310Z] "GET /a HTTP/2" 200 - 0 12 57 55` + "\n" +
		strings.Repeat("x", MaxAccessLine+10) + "\n" +
		`1.2.3.4 - - [30/Nov/2026:12:00:01 +0000] "GET / HTTP/1.1" 200 5 "-" "ua" 0.1` + "\n" +
		`[2026-11-30T12:00:01.000Z] "GET /b HTTP/2" 200 - 0 12 1 1`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(log))
	zw.Close()
	d, err := NewAccessDecoder(&gz, AccessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		paths []string
		skips []string
		req   Request
		skip  *SkipError
	)
	for {
		err := d.Next(&req)
		if err == io.EOF {
			break
		}
		if errors.As(err, &skip) {
			skips = append(skips, skip.Where)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, req.Path)
	}
	if strings.Join(paths, " ") != "/a /b" || strings.Join(skips, ",") != "line 2,line 4,line 5" || d.Format() != Envoy {
		t.Errorf("paths %q, skips %q, format %q", paths, skips, d.Format())
	}
	if _, err := NewAccessDecoder(strings.NewReader(""), AccessOptions{Format: "w3c"}); err == nil {
		t.Error("unknown format accepted")
	}
}

// FuzzParseAccessLine: no line makes the parser panic, and what it reads
// is a request of bounded service time.
func FuzzParseAccessLine(f *testing.F) {
	f.Add([]byte(`203.0.113.7 - - [30/Nov/2026:12:00:01 +0000] "GET /hello HTTP/1.1" 200 512 "-" "curl/8" 0.250`))
	f.Add([]byte(`https 2026-11-30T12:00:01.5Z app/lb/1 1.2.3.4:5 10.0.0.1:80 0.001 0.300 0.100 200 200 34 366 "GET https://h:443/x HTTP/1.1" "ua"`))
	f.Add([]byte(`[2026-11-30T12:00:00.310Z] "GET /hello HTTP/2" 200 - 0 12 57 55 "-" "ua" "id" "h:1" "u"`))
	f.Add([]byte(`[" "\" ] "GET http://[::1 x`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, fm := range AccessFormats {
			r, err := ParseAccessLine(line, fm)
			if err == nil && (r.Service < 0 || r.Service > MaxServiceTime || r.Path == "") {
				t.Errorf("%s %q: %+v", fm, line, r)
			}
		}
		d, err := NewAccessDecoder(bytes.NewReader(line), AccessOptions{})
		if err != nil {
			return
		}
		var req Request
		for range 100 {
			if err := d.Next(&req); err != nil && !errors.As(err, new(*SkipError)) {
				return
			}
		}
		t.Errorf("%q: more than 100 records", line)
	})
}
