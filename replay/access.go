package replay

// This file reads HTTP access logs: the requests an autoscaled service
// served, with when they arrived and how long they ran.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// AccessFormat names an HTTP access log format.
type AccessFormat string

// The access log formats an AccessDecoder reads.
const (
	// Combined is nginx's (and Apache's) Combined Log Format with the
	// request time in seconds ($request_time) as the last field, or
	// without it when AccessOptions.RequestTime gives one to assume. The
	// line is written when the request ends: it arrived its request time
	// before the logged time (whose resolution is a second).
	Combined AccessFormat = "combined"
	// ALB is an AWS Application Load Balancer access log. A request
	// reached its target target_processing_time and
	// response_processing_time before the logged time, and ran there for
	// target_processing_time.
	ALB AccessFormat = "alb"
	// Envoy is Envoy's default access log format: the request started at
	// START_TIME and ran for DURATION milliseconds.
	Envoy AccessFormat = "envoy"
	// Nginx is a log in the layout of an nginx log_format string
	// (AccessOptions.LogFormat).
	Nginx AccessFormat = "nginx"
)

// AccessFormats are the formats detected by their lines' shape, for
// flags and errors (Nginx needs its log_format).
var AccessFormats = []AccessFormat{Combined, ALB, Envoy}

// Limits on an access log line.
const (
	// MaxAccessLine bounds a line; longer ones are skipped.
	MaxAccessLine = 64 << 10
	// MaxServiceTime bounds a request's duration; longer ones are skipped.
	MaxServiceTime = 24 * time.Hour
	maxFields      = 64
)

// Request is one request of an access log.
type Request struct {
	// At is when it reached the service, in Unix nanoseconds.
	At int64
	// Service is how long it ran there.
	Service time.Duration
	// Host is the request's host, without port, when the log gives it.
	Host string
	// Path is the request's path, without its query.
	Path string
}

// An AccessDecoder reads the requests of an access log, a line at a time.
type AccessDecoder struct {
	br      *bufio.Reader
	format  AccessFormat
	logf    *LogFormat
	assume  time.Duration
	assumed int64 // requests whose request time was assumed
	line    int64
	parser  lineParser
	parsed  bool  // a line has been read as a request
	failed  int   // lines skipped before the first request
	first   error // the first of them
}

// MaxUnreadLines is how many lines an access log may skip before its first
// request: past it, the log is in no format replay reads, and ends with
// an error rather than a skip a line.
const MaxUnreadLines = 100

// AccessOptions say how to read an access log.
type AccessOptions struct {
	// Format is the log's format; empty detects it from its first line,
	// among AccessFormats. With a LogFormat it is Nginx, or empty.
	Format AccessFormat
	// LogFormat, when not nil, is the log's layout as an nginx
	// log_format string says it.
	LogFormat *LogFormat
	// RequestTime, when not 0, is how long a request ran when its line
	// has no request time (nginx's combined format, a log_format without
	// $request_time); without it such a line is skipped.
	RequestTime time.Duration
}

// NewAccessDecoder returns a decoder of the access log r, gzipped or not
// (by its magic number), read as opt says.
func NewAccessDecoder(r io.Reader, opt AccessOptions) (*AccessDecoder, error) {
	f := opt.Format
	if opt.LogFormat != nil {
		if f != "" && f != Nginx {
			return nil, fmt.Errorf("replay: a log_format reads nginx logs, not %s", f)
		}
		f = Nginx
	} else if f != "" && !validFormat(f) {
		return nil, fmt.Errorf("replay: unknown access log format %q (want combined, alb, envoy, or an nginx log_format)", f)
	}
	if opt.RequestTime < 0 || opt.RequestTime > MaxServiceTime {
		return nil, fmt.Errorf("replay: request time %v: want one from 0 to %v", opt.RequestTime, MaxServiceTime)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		zr.Multistream(true)
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	d := &AccessDecoder{br: br, format: f, logf: opt.LogFormat, assume: opt.RequestTime}
	d.parser.assume = opt.RequestTime
	return d, nil
}

// Assumed returns how many requests read so far had no request time, and
// ran AccessOptions.RequestTime.
func (d *AccessDecoder) Assumed() int64 { return d.assumed }

func validFormat(f AccessFormat) bool {
	for _, g := range AccessFormats {
		if f == g {
			return true
		}
	}
	return false
}

// Format is the log's format: given, or detected; empty until a line
// has been read in it.
func (d *AccessDecoder) Format() AccessFormat { return d.format }

// Next reads the next request into req. It returns io.EOF at the end, a
// *SkipError for a line it skips (call Next again), and any other error
// when the rest of the log cannot be read: a truncated gzip, or a log
// whose first MaxUnreadLines lines are none of them a request. Blank
// lines are passed over.
func (d *AccessDecoder) Next(req *Request) error {
	err := d.next(req)
	var skip *SkipError
	switch {
	case err == nil:
		d.parsed = true
	case !d.parsed && errors.As(err, &skip):
		if d.failed++; d.failed == 1 {
			d.first = err
		}
		if d.failed >= MaxUnreadLines {
			return fmt.Errorf("not an access log replay reads (combined with $request_time last, ALB, Envoy): none of its first %d lines is a request; the first: %v", d.failed, d.first)
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("line %d: the log ends early (a truncated gzip?): %w", d.line+1, err)
	case err != io.EOF && !errors.As(err, &skip):
		return fmt.Errorf("line %d: %w", d.line+1, err)
	}
	return err
}

func (d *AccessDecoder) next(req *Request) error {
	for {
		line, tooLong, err := d.readLine()
		if err != nil && (len(line) == 0 || err != io.EOF) {
			return err
		}
		d.line++
		if tooLong {
			return &SkipError{Where: d.where(), Reason: fmt.Sprintf("line longer than %d bytes", MaxAccessLine)}
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if d.logf != nil {
			r, assumed, perr := d.logf.parse(string(line), d.assume)
			if perr != nil {
				return &SkipError{Where: d.where(), Reason: "not in the log format: " + perr.Error() + ": " + sample(line)}
			}
			if assumed {
				d.assumed++
			}
			*req = r
			return nil
		}
		f := d.format
		if f == "" {
			f = detectFormat(d.parser.split(line))
			if f == "" {
				return &SkipError{Where: d.where(), Reason: "not a line of a combined, ALB or Envoy access log: " + sample(line)}
			}
		}
		d.parser.assumed = false
		r, perr := d.parser.parse(line, f)
		if perr != nil {
			return &SkipError{Where: d.where(), Reason: perr.Error() + ": " + sample(line)}
		}
		if d.parser.assumed {
			d.assumed++
		}
		d.format = f
		*req = r
		return nil
	}
}

func (d *AccessDecoder) where() string { return fmt.Sprintf("line %d", d.line) }

// sample is the start of a line, for a skip's reason.
func sample(line []byte) string {
	const n = 80
	if len(line) > n {
		return fmt.Sprintf("%q...", line[:n])
	}
	return fmt.Sprintf("%q", line)
}

// readLine reads a line without its newline; a line over MaxAccessLine is
// read to its end and reported too long.
func (d *AccessDecoder) readLine() (line []byte, tooLong bool, err error) {
	var long []byte
	for {
		chunk, err := d.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if !tooLong {
				long = append(long, chunk...)
				if len(long) > MaxAccessLine {
					tooLong, long = true, nil
				}
			}
			continue
		}
		if tooLong {
			return nil, true, nil
		}
		if long != nil {
			chunk = append(long, chunk...)
			if len(chunk) > MaxAccessLine {
				return nil, true, nil
			}
		}
		if err == io.EOF && len(chunk) > 0 {
			err = nil
		}
		return chunk, false, err
	}
}

// DetectAccessFormat returns the format line is in, by its shape, or ""
// when it is in none.
func DetectAccessFormat(line []byte) AccessFormat {
	return detectFormat(fields(nil, line))
}

func detectFormat(f []string) AccessFormat {
	switch {
	case len(f) == 0:
		return ""
	case strings.HasPrefix(f[0], "["):
		return Envoy
	case len(f) > 3 && strings.HasPrefix(f[3], "["):
		return Combined
	case len(f) > 1 && albType(f[0]):
		return ALB
	}
	return ""
}

func albType(s string) bool {
	switch s {
	case "http", "https", "h2", "grpcs", "ws", "wss":
		return true
	}
	return false
}

// ParseAccessLine reads one line of an access log in format f.
func ParseAccessLine(line []byte, f AccessFormat) (Request, error) {
	var p lineParser
	return p.parse(line, f)
}

// lineParser reads the lines of one log: it keeps its slice of fields,
// and the last time it read, which the next lines of a log mostly share
// (nginx writes times to the second).
type lineParser struct {
	fs       []string
	lastText string
	lastTime time.Time
	assume   time.Duration // the request time of a combined line without one
	assumed  bool          // the last line's was
}

// split splits line into the parser's fields.
func (p *lineParser) split(line []byte) []string {
	p.fs = fields(p.fs[:0], line)
	return p.fs
}

func (p *lineParser) parse(line []byte, f AccessFormat) (Request, error) {
	fs := p.split(line)
	switch f {
	case Combined:
		return p.parseCombined(fs)
	case ALB:
		return parseALB(fs)
	case Envoy:
		return parseEnvoy(fs)
	}
	return Request{}, fmt.Errorf("unknown access log format %q", f)
}

var errFields = errors.New("too few fields")

func (p *lineParser) parseCombined(f []string) (Request, error) {
	// host ident user [time] "request" status bytes ["referer" "agent"] request_time
	if len(f) < 8 || !strings.HasPrefix(f[3], "[") {
		return Request{}, errFields
	}
	end := p.lastTime
	if f[3] != p.lastText || p.lastText == "" {
		var err error
		if end, err = time.Parse("[02/Jan/2006:15:04:05 -0700]", f[3]); err != nil {
			return Request{}, fmt.Errorf("time %s: want [02/Jan/2006:15:04:05 -0700]", f[3])
		}
		p.lastText, p.lastTime = f[3], end
	}
	last := f[len(f)-1]
	var d time.Duration
	var err error
	switch {
	case strings.HasPrefix(last, `"`) && p.assume > 0: // nginx's own combined: no request time
		d, p.assumed = p.assume, true
	case strings.HasPrefix(last, `"`):
		return Request{}, errors.New("no request time after the user agent (nginx's combined format has none): give one to assume (--request-time)")
	default:
		if d, err = decimal(last, 1e9); err != nil {
			return Request{}, fmt.Errorf("request time %q: %w", last, err)
		}
	}
	r := Request{At: end.UnixNano() - int64(d), Service: d}
	r.Host, r.Path, err = requestLine(f[4])
	return r, err
}

func parseALB(f []string) (Request, error) {
	// type time elb client:port target:port request_processing_time
	// target_processing_time response_processing_time elb_status_code
	// target_status_code received_bytes sent_bytes "request" ...
	if len(f) < 13 {
		return Request{}, errFields
	}
	end, err := time.Parse(time.RFC3339Nano, f[1])
	if err != nil {
		return Request{}, fmt.Errorf("time %q: want ISO 8601", f[1])
	}
	if f[6] == "-1" || f[7] == "-1" {
		return Request{}, errors.New("not served by a target (processing time -1)")
	}
	target, err := decimal(f[6], 1e9)
	if err != nil {
		return Request{}, fmt.Errorf("target_processing_time %q: %w", f[6], err)
	}
	resp, err := decimal(f[7], 1e9)
	if err != nil {
		return Request{}, fmt.Errorf("response_processing_time %q: %w", f[7], err)
	}
	r := Request{At: end.UnixNano() - int64(target) - int64(resp), Service: target}
	r.Host, r.Path, err = requestLine(f[12])
	return r, err
}

func parseEnvoy(f []string) (Request, error) {
	// [START_TIME] "METHOD PATH PROTOCOL" RESPONSE_CODE RESPONSE_FLAGS
	// BYTES_RECEIVED BYTES_SENT DURATION UPSTREAM_SERVICE_TIME "XFF"
	// "USER-AGENT" "REQUEST-ID" "AUTHORITY" "UPSTREAM_HOST"
	if len(f) < 7 {
		return Request{}, errFields
	}
	start, err := time.Parse(time.RFC3339Nano, strings.TrimSuffix(strings.TrimPrefix(f[0], "["), "]"))
	if err != nil {
		return Request{}, fmt.Errorf("start time %s: want ISO 8601", f[0])
	}
	d, err := decimal(f[6], 1e6)
	if err != nil {
		return Request{}, fmt.Errorf("duration %q: %w", f[6], err)
	}
	r := Request{At: start.UnixNano(), Service: d}
	r.Host, r.Path, err = requestLine(f[1])
	if len(f) > 11 {
		if h := strings.Trim(f[11], `"`); h != "-" {
			r.Host = stripPort(h)
		}
	}
	return r, err
}

// requestLine returns the host (of an absolute URL) and path of a quoted
// request line, "METHOD TARGET PROTOCOL".
func requestLine(q string) (host, path string, err error) {
	if len(q) < 2 || q[0] != '"' {
		return "", "", errors.New("request line not quoted")
	}
	// The target is the second field: after the method, up to a blank.
	m := strings.TrimLeft(q[1:len(q)-1], " \t")
	i := strings.IndexAny(m, " \t")
	target := ""
	if i >= 0 {
		target = strings.TrimLeft(m[i:], " \t")
		if j := strings.IndexAny(target, " \t"); j >= 0 {
			target = target[:j]
		}
	}
	if target == "" {
		return "", "", fmt.Errorf("request line %s: want METHOD PATH PROTOCOL", q)
	}
	if strings.HasPrefix(target, "/") {
		path, _, _ = strings.Cut(target, "?")
		return "", path, nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("request target %q: want a path or an absolute URL", target)
	}
	path = u.Path
	if path == "" {
		path = "/"
	}
	return u.Hostname(), path, nil
}

func stripPort(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		return h[:i]
	}
	return h
}

// decimal reads a non-negative decimal number of units (a unit being
// unit nanoseconds) exactly, to the nanosecond, up to MaxServiceTime.
func decimal(s string, unit int64) (time.Duration, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" {
		return 0, errors.New("not a number")
	}
	var n int64
	for _, c := range []byte(whole) {
		if c < '0' || c > '9' {
			return 0, errors.New("not a non-negative number")
		}
		n = n*10 + int64(c-'0')
		if n*unit > int64(MaxServiceTime) {
			return 0, fmt.Errorf("more than %v", MaxServiceTime)
		}
	}
	ns := n * unit
	for i, scale := 0, unit/10; i < len(frac); i, scale = i+1, scale/10 {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, errors.New("not a non-negative number")
		}
		ns += int64(c-'0') * scale
	}
	if ns > int64(MaxServiceTime) {
		return 0, fmt.Errorf("more than %v", MaxServiceTime)
	}
	return time.Duration(ns), nil
}

// fields appends to out the fields of a log line: "quoted" (with \"
// escapes) and [bracketed] ones whole, with their delimiters, others at
// spaces; at most maxFields.
func fields(out []string, line []byte) []string {
	s := string(line)
	i := 0
	for i < len(s) && len(out) < maxFields {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			break
		}
		j := i + 1
		switch s[i] {
		case '"':
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(s))
		case '[':
			for j < len(s) && s[j] != ']' {
				j++
			}
			j = min(j+1, len(s))
		default:
			for j < len(s) && s[j] != ' ' && s[j] != '\t' {
				j++
			}
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}
