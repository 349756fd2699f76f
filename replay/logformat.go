package replay

// This file reads access logs in any layout nginx's log_format directive
// describes: "$remote_addr - [$time_local] \"$request\" $status rt=$request_time …".

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// NginxCombined is nginx's predefined combined log_format, which has no
// request time: its logs need AccessOptions.RequestTime.
const NginxCombined = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`

// maxLogFormat bounds a log_format string.
const maxLogFormat = 4096

// LogFormat is a compiled nginx log_format: the literal text between its
// variables, and what replay reads of each variable.
type LogFormat struct {
	text  string
	lits  []string // len(vars)+1 literals: before, between and after the variables
	vars  []logVar
	timed bool // it has a variable of the request's time
	took  bool // it has $request_time or $upstream_response_time
}

// logVar is what a variable of a log_format gives.
type logVar int

const (
	varIgnored logVar = iota
	varTimeLocal
	varTimeISO
	varMsec
	varRequestTime
	varUpstreamTime
	varRequest
	varRequestURI
	varHost
)

var logVars = map[string]logVar{
	"time_local":             varTimeLocal,
	"time_iso8601":           varTimeISO,
	"msec":                   varMsec,
	"request_time":           varRequestTime,
	"upstream_response_time": varUpstreamTime,
	"request":                varRequest,
	"request_uri":            varRequestURI,
	"uri":                    varRequestURI,
	"document_uri":           varRequestURI,
	"host":                   varHost,
	"http_host":              varHost,
	"server_name":            varHost,
}

// ParseLogFormat compiles a format in the syntax of nginx's log_format
// directive (the string, its quotes and concatenation already undone by
// the shell): text and $variables, or ${variable} where a name runs on
// into text. "combined" names nginx's predefined format. It needs a
// variable of the time ($time_local, $time_iso8601 or $msec), and two
// variables must have text between them to be told apart.
func ParseLogFormat(s string) (*LogFormat, error) {
	if s == "combined" {
		s = NginxCombined
	}
	if len(s) > maxLogFormat {
		return nil, fmt.Errorf("log format longer than %d bytes", maxLogFormat)
	}
	lf := &LogFormat{text: s}
	var lit strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' {
			lit.WriteByte(s[i])
			i++
			continue
		}
		j := i + 1
		var name string
		if j < len(s) && s[j] == '{' {
			end := strings.IndexByte(s[j:], '}')
			if end < 0 {
				return nil, fmt.Errorf("log format: ${ at byte %d is not closed", i)
			}
			name, j = s[j+1:j+end], j+end+1
		} else {
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			name = s[i+1 : j]
		}
		if name == "" {
			return nil, fmt.Errorf("log format: $ at byte %d names no variable", i)
		}
		if len(lf.vars) > 0 && lit.Len() == 0 {
			return nil, fmt.Errorf("log format: $%s follows another variable with no text between them: their values cannot be told apart", name)
		}
		lf.lits = append(lf.lits, lit.String())
		lit.Reset()
		v := logVars[strings.ToLower(name)]
		lf.vars = append(lf.vars, v)
		switch v {
		case varTimeLocal, varTimeISO, varMsec:
			lf.timed = true
		case varRequestTime, varUpstreamTime:
			lf.took = true
		}
		i = j
	}
	lf.lits = append(lf.lits, lit.String())
	if !lf.timed {
		return nil, errors.New("log format: no variable of the time ($time_local, $time_iso8601 or $msec): a request cannot be placed in time")
	}
	return lf, nil
}

// String returns the format as given.
func (lf *LogFormat) String() string { return lf.text }

// HasRequestTime reports whether the format has $request_time (or
// $upstream_response_time): without, its logs need a request time assumed.
func (lf *LogFormat) HasRequestTime() bool { return lf.took }

// parse reads one line. A request without a request time runs assume
// (none when 0: an error); assumed reports that it did.
func (lf *LogFormat) parse(line string, assume time.Duration) (r Request, assumed bool, err error) {
	if !strings.HasPrefix(line, lf.lits[0]) {
		return r, false, fmt.Errorf("does not begin with %q", lf.lits[0])
	}
	rest := line[len(lf.lits[0]):]
	var (
		end         int64
		took, upstr time.Duration
		hasTook     bool
		hasUpstr    bool
		reqLine     string
		uri         string
	)
	for i, v := range lf.vars {
		next := lf.lits[i+1]
		var val string
		switch {
		case next == "" && i == len(lf.vars)-1:
			val, rest = rest, ""
		default:
			k := strings.Index(rest, next)
			if k < 0 {
				return r, false, fmt.Errorf("no %q after $%d", next, i+1)
			}
			val, rest = rest[:k], rest[k+len(next):]
		}
		if val == "-" || val == "" {
			continue
		}
		switch v {
		case varTimeLocal:
			t, err := time.Parse("02/Jan/2006:15:04:05 -0700", val)
			if err != nil {
				return r, false, fmt.Errorf("$time_local %q: want 02/Jan/2006:15:04:05 -0700", val)
			}
			end = t.UnixNano()
		case varTimeISO:
			t, err := time.Parse(time.RFC3339Nano, val)
			if err != nil {
				return r, false, fmt.Errorf("$time_iso8601 %q: want 2006-01-02T15:04:05-07:00", val)
			}
			end = t.UnixNano()
		case varMsec:
			sec, ok := unixSeconds(val)
			if !ok {
				return r, false, fmt.Errorf("$msec %q: want seconds since 1970, as 1796040000.123", val)
			}
			end = sec
		case varRequestTime:
			if took, err = decimal(val, 1e9); err != nil {
				return r, false, fmt.Errorf("$request_time %q: %w", val, err)
			}
			hasTook = true
		case varUpstreamTime:
			last := val[strings.LastIndexAny(val, ",:")+1:]
			if upstr, err = decimal(strings.TrimSpace(last), 1e9); err == nil {
				hasUpstr = true
			}
		case varRequest:
			reqLine = val
		case varRequestURI:
			uri = val
		case varHost:
			r.Host = stripPort(val)
		}
	}
	if rest != "" {
		return r, false, fmt.Errorf("text after the format's end: %q", sample([]byte(rest)))
	}
	if end == 0 {
		return r, false, errors.New("no time")
	}
	switch {
	case hasTook:
	case hasUpstr:
		took = upstr
	case assume > 0:
		took, assumed = assume, true
	default:
		return r, false, errors.New("no request time ($request_time): give one to assume (--request-time)")
	}
	r.At, r.Service = end-int64(took), took
	switch {
	case uri != "":
		r.Path, _, _ = strings.Cut(uri, "?")
	case reqLine != "":
		host, path, err := requestLine(`"` + reqLine + `"`)
		if err != nil {
			return r, false, err
		}
		r.Path = path
		if r.Host == "" {
			r.Host = host
		}
	default:
		r.Path = "/"
	}
	if !strings.HasPrefix(r.Path, "/") {
		return r, false, fmt.Errorf("path %q: want one starting with /", r.Path)
	}
	return r, assumed, nil
}

// unixSeconds reads seconds since 1970 with up to nine decimals, as
// nginx's $msec writes them, in Unix nanoseconds.
func unixSeconds(s string) (int64, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec < 0 || sec > 7258118400 || len(frac) > 9 { // to 2200
		return 0, false
	}
	ns := int64(0)
	for i := range 9 {
		ns *= 10
		if i < len(frac) {
			c := frac[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			ns += int64(c - '0')
		}
	}
	return sec*1e9 + ns, true
}
