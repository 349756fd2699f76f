package replay

import (
	"strings"
	"testing"
	"time"
)

func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format, line string
		assume       time.Duration
		want         Request
		assumed      bool
	}{
		{"combined", `203.0.113.7 - - [30/Nov/2026:12:00:01 +0000] "GET /hello/x?a=1 HTTP/1.1" 200 512 "-" "curl/8"`, 100 * time.Millisecond,
			Request{At: noon.Add(time.Second - 100*time.Millisecond).UnixNano(), Service: 100 * time.Millisecond, Path: "/hello/x"}, true},
		{`$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time uct="$upstream_connect_time" host=$host`,
			`10.0.0.1 - alice [30/Nov/2026:13:00:02 +0100] "POST http://api.example.com:8080/orders HTTP/2.0" 201 33 "-" "Mozilla/5.0 (X11; Linux)" rt=0.250 uct="0.001" host=api.example.com`, 0,
			Request{At: noon.Add(2*time.Second - 250*time.Millisecond).UnixNano(), Service: 250 * time.Millisecond, Host: "api.example.com", Path: "/orders"}, false},
		{`${msec}|${request_time}|${host}|${uri}`, `1796040001.500|0.5|h:443|/a/b`, 0,
			Request{At: noon.Add(time.Second).UnixNano(), Service: 500 * time.Millisecond, Host: "h", Path: "/a/b"}, false},
		{`$time_iso8601 $request_uri $upstream_response_time`, `2026-11-30T12:00:03+00:00 /x?y 0.010, 0.200`, 0,
			Request{At: noon.Add(3*time.Second - 200*time.Millisecond).UnixNano(), Service: 200 * time.Millisecond, Path: "/x"}, false},
	} {
		lf, err := ParseLogFormat(tc.format)
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		got, assumed, err := lf.parse(tc.line, tc.assume)
		if err != nil || got != tc.want || assumed != tc.assumed {
			t.Errorf("%s\n%s:\n%+v %v %v\nwant %+v %v", tc.format, tc.line, got, assumed, err, tc.want, tc.assumed)
		}
	}
	lf, _ := ParseLogFormat("combined")
	if _, _, err := lf.parse(`1.2.3.4 - - [30/Nov/2026:12:00:01 +0000] "GET / HTTP/1.1" 200 5 "-" "ua"`, 0); err == nil || !strings.Contains(err.Error(), "--request-time") {
		t.Errorf("no request time and none to assume: %v", err)
	}
	for format, why := range map[string]string{
		`$remote_addr $request_time`:        "no variable of the time",
		`[$time_local]$request_time$status`: "no text between",
		`[$time_local] ${request`:           "not closed",
		`[$time_local] $ x`:                 "names no variable",
		strings.Repeat("x", 5000):           "longer than",
	} {
		if _, err := ParseLogFormat(format); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want %q", format, err, why)
		}
	}
}

// TestCombinedWithoutRequestTime: nginx's own combined format, detected,
// plays with --request-time and a warning saying what was assumed;
// without it every line is skipped and the file is an error.
func TestCombinedWithoutRequestTime(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		b.WriteString(noon.Add(time.Duration(i)*100*time.Millisecond).Format(`203.0.113.7 - - [02/Jan/2006:15:04:05 -0700] "GET /hello HTTP/1.1" 200 5 "-" "ua"`) + "\n")
	}
	svc := []ScaleService{{Name: "hello", Backend: stepScale}}
	rep, err := RunScale([]Input{memInput("default.log", []byte(b.String()))}, ScaleOptions{Services: svc, Service: "hello", RequestTime: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Services[0].Columns[0].Requests != 50 || rep.Assumed != 50 || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "assumed to run 100ms") {
		t.Errorf("%d requests, %d assumed, warnings %q", rep.Services[0].Columns[0].Requests, rep.Assumed, rep.Warnings)
	}
	rep, err = RunScale([]Input{memInput("default.log", []byte(b.String()))}, ScaleOptions{Services: svc, Service: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 0 || rep.Skipped != 50 || !strings.Contains(strings.Join(rep.SkipSamples, " "), "--request-time") {
		t.Errorf("without --request-time: %d requests, %d skipped %q", rep.Requests, rep.Skipped, rep.SkipSamples)
	}
}

// FuzzLogFormat: no format and line make the compiler or the reader
// panic, and a line read is a request of bounded service time with a
// path.
func FuzzLogFormat(f *testing.F) {
	f.Add(`$remote_addr [$time_local] "$request" rt=$request_time`, `1.2.3.4 [30/Nov/2026:12:00:01 +0000] "GET /x HTTP/1.1" rt=0.1`)
	f.Add("combined", `1.2.3.4 - - [30/Nov/2026:12:00:01 +0000] "GET / HTTP/1.1" 200 5 "-" "ua"`)
	f.Add(`${msec}|${request_time}|${host}|${uri}`, `1796040001.5|0.5|h|/a`)
	f.Add(`$time_iso8601 $request_uri $upstream_response_time`, `2026-11-30T12:00:03Z /x 0.1, 0.2`)
	f.Fuzz(func(t *testing.T, format, line string) {
		lf, err := ParseLogFormat(format)
		if err != nil {
			return
		}
		r, _, err := lf.parse(line, time.Second)
		if err == nil && (r.Service < 0 || r.Service > MaxServiceTime || !strings.HasPrefix(r.Path, "/")) {
			t.Errorf("%q %q: %+v", format, line, r)
		}
	})
}
