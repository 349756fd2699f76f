package replay

// This file reads one log: CloudTrail's {"Records":[…]} files, gzipped or
// not, and exports of one JSON record a line (CloudTrail Lake, Athena),
// streaming, with every record bounded in size.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxRecordSize bounds one record (a line of an export, or an element of
// Records): a longer one is skipped in an export, and ends a Records file,
// whose JSON cannot be resumed after it. CloudTrail's own records are at
// most 256 KB.
const MaxRecordSize = 1 << 20

// CloudTrailFormats names the CloudTrail formats a Decoder reads, for
// errors and help.
const CloudTrailFormats = `a delivered log file ({"Records":[…]}, gzipped or not, as the console's JSON download too), ` +
	`one JSON record a line (CloudTrail Lake and Athena exports), ` +
	`aws cloudtrail lookup-events output ({"Events":[{"CloudTrailEvent":"…"}]}), ` +
	`CloudTrail Lake query results (get-query-results: {"QueryResultRows":[…]}), ` +
	`or the console's CSV download (a header naming Event time, Event source, Event name …)`

// ErrUnknownFormat reports an input in none of CloudTrailFormats.
var ErrUnknownFormat = errors.New("not a CloudTrail log: want " + CloudTrailFormats)

// ErrRecordTooLarge reports a record longer than MaxRecordSize.
var ErrRecordTooLarge = fmt.Errorf("record longer than %d bytes", MaxRecordSize)

// Record is what replay reads of one CloudTrail event.
type Record struct {
	// Time is eventTime, in Unix nanoseconds.
	Time int64
	// Source is eventSource ("ecs.amazonaws.com"), Action eventName,
	// Region awsRegion.
	Source, Action, Region string
	// AccessKey and Account are userIdentity's accessKeyId and accountId
	// (recipientAccountId when it has none).
	AccessKey, Account string
	// ErrorCode is errorCode: "" for a call that succeeded.
	ErrorCode string
	// Principal is userIdentity.arn, UserAgent userAgent, SourceIP
	// sourceIPAddress: who made the call.
	Principal, UserAgent, SourceIP string
	// Params is requestParameters, the call's request as JSON (an object
	// from CloudTrail, or the string of one as Athena's table holds it);
	// nil when the record has none. It is valid until the next Next.
	Params []byte
}

// isEmpty reports a record with none of the members replay reads.
func (r *Record) isEmpty() bool {
	return r.Time == 0 && r.Source == "" && r.Action == "" && r.Region == "" &&
		r.AccessKey == "" && r.Account == "" && r.ErrorCode == "" && r.Params == nil &&
		r.Principal == "" && r.UserAgent == "" && r.SourceIP == ""
}

// SkipError is a record skipped and counted: the input goes on after it.
type SkipError struct {
	// Where locates the record: "line 12" or "record 7".
	Where string
	// Reason says what is wrong with it.
	Reason string
}

func (e *SkipError) Error() string { return e.Where + ": " + e.Reason }

// layout is how a log holds its records.
type layout int

const (
	lines   layout = iota // one JSON record a line
	records               // {"Records":[record…]}
	events                // lookup-events: {"Events":[{"CloudTrailEvent":"record"}…]}
	rows                  // Lake query results: {"QueryResultRows":[[{"column":"value"}…]…]}
	csvRows               // the console's CSV download
)

// wrappers are the members of an outer object that hold the records, by
// the layout they give.
var wrappers = map[string]layout{`"Records"`: records, `"Events"`: events, `"QueryResultRows"`: rows}

// Decoder reads the records of one log, in the order the log holds them.
type Decoder struct {
	br      *bufio.Reader
	dec     *jsontext.Decoder
	sub     *jsontext.Decoder // a lookup-events record, from its string
	lim     *recordLimit
	layout  layout
	columns []func(*Decoder, *Record, string) error // csvRows: by column
	started bool
	n       int64 // records (or lines) read
	good    int64 // records returned
	line    []byte
	strs    map[string]string
	lastTS  []byte
	lastT   int64
	params  []byte // Record.Params
}

// recordLimit fails reads once more than max bytes passed since reset: a
// record of a Records file that will not end.
type recordLimit struct {
	r    io.Reader
	read int64
	max  int64
}

func (l *recordLimit) Read(p []byte) (int, error) {
	if l.read > l.max {
		return 0, ErrRecordTooLarge
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	return n, err
}

// NewDecoder returns a decoder of the log r: gzipped or not (by its magic
// number), a Records file or an export of one record a line (by its first
// member). It reads no more of r than it needs to tell.
func NewDecoder(r io.Reader) (*Decoder, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		zr.Multistream(true)
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	d := &Decoder{br: br, strs: make(map[string]string)}
	head, err := br.Peek(512)
	if len(head) == 0 && err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%w: the input is empty", ErrUnknownFormat)
		}
		return nil, err
	}
	head = bytes.TrimLeft(head, " \t\r\n")
	d.lim = &recordLimit{r: br, max: MaxRecordSize}
	d.dec = jsontext.NewDecoder(d.lim, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	switch {
	case len(head) > 0 && head[0] == '{':
		rest := bytes.TrimLeft(head[1:], " \t\r\n")
		for _, name := range []string{`"Records"`, `"Events"`, `"QueryResultRows"`, `"QueryStatus"`, `"QueryStatistics"`, `"NextToken"`, `"ErrorMessage"`} {
			if bytes.HasPrefix(rest, []byte(name)) {
				d.layout = records // the wrapper found by enter
			}
		}
	case isCSVHeader(head):
		d.layout = csvRows
	default:
		return nil, ErrUnknownFormat
	}
	return d, nil
}

// LooksLikeCloudTrail reports whether the first bytes of a log (without
// leading blanks) are those of one of CloudTrailFormats: JSON, or the
// console's CSV header.
func LooksLikeCloudTrail(head []byte) bool {
	return len(head) > 0 && head[0] == '{' || isCSVHeader(head)
}

// Next reads the next record into rec. It returns io.EOF at the end, a
// *SkipError for a record it skips (call Next again), and any other error
// when the rest of the log cannot be read.
func (d *Decoder) Next(rec *Record) error {
	switch d.layout {
	case lines:
		return d.nextLine(rec)
	case csvRows:
		return d.nextCSV(rec)
	}
	return d.nextRecord(rec)
}

// nextRecord reads the next element of {"Records":[…]}, skipping other
// members of the outer object.
func (d *Decoder) nextRecord(rec *Record) error {
	if !d.started {
		if err := d.enterRecords(); err != nil {
			return err
		}
		d.started = true
	}
	if d.dec.PeekKind() == ']' {
		if _, err := d.dec.ReadToken(); err != nil {
			return d.syntax(err)
		}
		// Members after Records are read and ignored.
		for d.dec.PeekKind() != '}' {
			if err := d.skipMember(); err != nil {
				return err
			}
		}
		if _, err := d.dec.ReadToken(); err != nil {
			return d.syntax(err)
		}
		if _, err := d.dec.ReadToken(); err != io.EOF {
			return fmt.Errorf("record %d: data after the end of the log", d.n)
		}
		return io.EOF
	}
	d.n++
	d.lim.read = 0
	want, read := jsontext.Kind('{'), d.readObject
	switch d.layout {
	case events:
		read = d.readEvent
	case rows:
		want, read = '[', d.readRow
	}
	if d.dec.PeekKind() != want {
		if err := d.dec.SkipValue(); err != nil {
			return d.syntax(err)
		}
		return &SkipError{Where: d.where(), Reason: "not a JSON " + map[jsontext.Kind]string{'{': "object", '[': "array"}[want]}
	}
	if err := read(rec); err != nil {
		var skip *SkipError
		if errors.As(err, &skip) {
			return err
		}
		return d.syntax(err)
	}
	return d.check(rec)
}

func (d *Decoder) enterRecords() error {
	if _, err := d.dec.ReadToken(); err != nil { // {
		return d.syntax(err)
	}
	for {
		if d.dec.PeekKind() == '}' {
			return fmt.Errorf("%w: the object has no Records, Events or QueryResultRows", ErrUnknownFormat)
		}
		name, err := d.dec.ReadValue()
		if err != nil {
			return d.syntax(err)
		}
		if l, ok := wrappers[string(name)]; ok {
			d.layout = l
			break
		}
		d.lim.read = 0
		if err := d.dec.SkipValue(); err != nil {
			return d.syntax(err)
		}
	}
	if d.dec.PeekKind() != '[' {
		return fmt.Errorf("%w: the records' member is not an array", ErrUnknownFormat)
	}
	_, err := d.dec.ReadToken()
	return d.syntax(err)
}

func (d *Decoder) skipMember() error {
	d.lim.read = 0
	if _, err := d.dec.ReadValue(); err != nil {
		return d.syntax(err)
	}
	return d.syntax(d.dec.SkipValue())
}

func (d *Decoder) syntax(err error) error {
	if err == nil {
		return nil
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("record %d: the log ends early: %w", d.n, io.ErrUnexpectedEOF)
	}
	if errors.Is(err, ErrRecordTooLarge) {
		return fmt.Errorf("record %d: %w", d.n, ErrRecordTooLarge)
	}
	return fmt.Errorf("record %d: %w", d.n, err)
}

func (d *Decoder) where() string {
	if d.layout != lines && d.layout != csvRows {
		return "record " + strconv.FormatInt(d.n, 10)
	}
	return "line " + strconv.FormatInt(d.n, 10)
}

// nextLine reads the next line of an export; blank lines are passed over.
func (d *Decoder) nextLine(rec *Record) error {
	for {
		line, tooLong, err := d.readLine()
		if err != nil {
			return err
		}
		d.n++
		if tooLong {
			return &SkipError{Where: d.where(), Reason: ErrRecordTooLarge.Error()}
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			return &SkipError{Where: d.where(), Reason: "not a JSON object"}
		}
		d.dec.Reset(bytes.NewReader(line), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
		if err := d.readObject(rec); err != nil {
			var skip *SkipError
			if errors.As(err, &skip) {
				return err
			}
			return &SkipError{Where: d.where(), Reason: "not JSON: " + err.Error()}
		}
		if _, err := d.dec.ReadToken(); err != io.EOF {
			return &SkipError{Where: d.where(), Reason: "more than one JSON value"}
		}
		if rec.isEmpty() && d.good == 0 {
			// The first object has none of a record's members: some other
			// JSON, not an export of CloudTrail records.
			return fmt.Errorf("%w: %s has none of eventTime, eventSource, eventName, awsRegion, userIdentity", ErrUnknownFormat, d.where())
		}
		return d.check(rec)
	}
}

// readLine returns the next line, without reading more than
// MaxRecordSize of it into memory: the rest of a longer line is read and
// dropped, and tooLong set.
func (d *Decoder) readLine() (line []byte, tooLong bool, err error) {
	d.line = d.line[:0]
	for {
		chunk, err := d.br.ReadSlice('\n')
		if !tooLong {
			if len(d.line)+len(chunk) > MaxRecordSize+1 {
				tooLong, d.line = true, d.line[:0]
			} else {
				d.line = append(d.line, chunk...)
			}
		}
		switch {
		case err == nil:
			return d.line, tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && (len(d.line) > 0 || tooLong):
			return d.line, tooLong, nil
		case err == io.EOF:
			return nil, false, io.EOF
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, false, fmt.Errorf("line %d: the log ends early: %w", d.n+1, err)
		default:
			return nil, false, fmt.Errorf("line %d: %w", d.n+1, err)
		}
	}
}

// check reports a record without the fields a replay needs.
func (d *Decoder) check(rec *Record) error {
	switch {
	case rec.Time == 0:
		return &SkipError{Where: d.where(), Reason: "no eventTime"}
	case rec.Source == "" || rec.Action == "":
		return &SkipError{Where: d.where(), Reason: "no eventSource or eventName"}
	case rec.Account == "" && rec.AccessKey == "":
		return &SkipError{Where: d.where(), Reason: "no userIdentity accountId or accessKeyId"}
	}
	d.good++
	return nil
}
