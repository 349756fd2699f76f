package replay

// This file reads the CloudTrail layouts other than AWS's delivered files
// and JSON lines: aws cloudtrail lookup-events output, CloudTrail Lake
// query results, and the console's CSV download.

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// readEvent reads one element of lookup-events' Events: the record is the
// string of its CloudTrailEvent member; the others repeat parts of it.
func (d *Decoder) readEvent(rec *Record) error {
	*rec = Record{}
	if _, err := d.dec.ReadToken(); err != nil { // {
		return err
	}
	var found bool
	var inner error
	for d.dec.PeekKind() != '}' {
		name, err := d.dec.ReadValue()
		if err != nil {
			return err
		}
		if string(name) != `"CloudTrailEvent"` {
			if err := d.dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		v, err := d.dec.ReadValue()
		if err != nil {
			return err
		}
		if v.Kind() != '"' {
			continue
		}
		s, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			continue
		}
		found = true
		inner = d.readEmbedded(rec, s)
	}
	if _, err := d.dec.ReadToken(); err != nil { // }
		return err
	}
	if !found {
		return &SkipError{Where: d.where(), Reason: "no CloudTrailEvent string"}
	}
	return inner
}

// readEmbedded reads a record from the JSON text b, a string member of
// the log's own JSON (lookup-events, the console's CSV).
func (d *Decoder) readEmbedded(rec *Record, b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return &SkipError{Where: d.where(), Reason: "its CloudTrail event is not a JSON object"}
	}
	if d.sub == nil {
		d.sub = jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	} else {
		d.sub.Reset(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	}
	outer := d.dec
	d.dec = d.sub
	err := d.readObject(rec)
	d.dec = outer
	var skip *SkipError
	if err != nil && !errors.As(err, &skip) {
		return &SkipError{Where: d.where(), Reason: "its CloudTrail event is not JSON: " + err.Error()}
	}
	return err
}

// readRow reads one row of Lake's QueryResultRows: a list of one-member
// objects, column name to value, as the query named its columns
// (eventTime, eventSource, eventName, awsRegion, errorCode,
// recipientAccountId, and userIdentity.accountId or .accessKeyId as
// accountId, accessKeyId).
func (d *Decoder) readRow(rec *Record) error {
	*rec = Record{}
	if _, err := d.dec.ReadToken(); err != nil { // [
		return err
	}
	var timeErr error
	for d.dec.PeekKind() != ']' {
		if d.dec.PeekKind() != '{' {
			if err := d.dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if _, err := d.dec.ReadToken(); err != nil {
			return err
		}
		for d.dec.PeekKind() != '}' {
			name, err := d.dec.ReadValue()
			if err != nil {
				return err
			}
			set := columnSetter(string(name[1 : len(name)-1])) // before the value's read reuses name
			v, err := d.dec.ReadValue()
			if err != nil {
				return err
			}
			if set == nil || v.Kind() != '"' {
				continue
			}
			val, err := jsontext.AppendUnquote(nil, v)
			if err != nil {
				continue
			}
			if err := set(d, rec, string(val)); err != nil {
				timeErr = err
			}
		}
		if _, err := d.dec.ReadToken(); err != nil {
			return err
		}
	}
	if _, err := d.dec.ReadToken(); err != nil { // ]
		return err
	}
	if timeErr != nil {
		return &SkipError{Where: d.where(), Reason: timeErr.Error()}
	}
	return nil
}

// normalColumn is a column's name in lower case without spaces,
// underscores or dots: "Event time", "event_time" and "eventTime" alike.
func normalColumn(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(strings.TrimSpace(s)) {
		if c != ' ' && c != '_' && c != '.' && c != '"' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// columnSetter returns what sets a record's member from a column's text,
// by the column's name; nil for a column replay does not read.
func columnSetter(name string) func(*Decoder, *Record, string) error {
	switch normalColumn(name) {
	case "eventtime":
		return func(d *Decoder, r *Record, v string) error {
			t, err := d.parseTime([]byte(v))
			r.Time = t
			return err
		}
	case "eventsource":
		return func(d *Decoder, r *Record, v string) error { r.Source = d.intern(v); return nil }
	case "eventname":
		return func(d *Decoder, r *Record, v string) error { r.Action = d.intern(v); return nil }
	case "awsregion":
		return func(d *Decoder, r *Record, v string) error { r.Region = d.intern(v); return nil }
	case "errorcode":
		return func(d *Decoder, r *Record, v string) error { r.ErrorCode = d.intern(v); return nil }
	case "accountid", "useridentityaccountid", "recipientaccountid":
		return func(d *Decoder, r *Record, v string) error {
			if r.Account == "" {
				r.Account = d.intern(v)
			}
			return nil
		}
	case "accesskeyid", "useridentityaccesskeyid", "awsaccesskey":
		return func(d *Decoder, r *Record, v string) error { r.AccessKey = d.intern(v); return nil }
	case "arn", "useridentityarn":
		return func(d *Decoder, r *Record, v string) error { r.Principal = d.intern(v); return nil }
	case "useragent":
		return func(d *Decoder, r *Record, v string) error { r.UserAgent = d.intern(v); return nil }
	case "sourceipaddress":
		return func(d *Decoder, r *Record, v string) error { r.SourceIP = d.intern(v); return nil }
	case "requestparameters":
		return func(d *Decoder, r *Record, v string) error {
			if v = strings.TrimSpace(v); strings.HasPrefix(v, "{") {
				d.params = append(d.params[:0], v...)
				r.Params = d.params
			}
			return nil
		}
	case "cloudtrailevent":
		return func(d *Decoder, r *Record, v string) error {
			err := d.readEmbedded(r, []byte(v))
			var skip *SkipError
			if errors.As(err, &skip) {
				return errors.New(skip.Reason)
			}
			return err
		}
	}
	return nil
}

// isCSVHeader reports whether head begins with the header of the
// console's CSV download: columns naming at least the event's time and
// name.
func isCSVHeader(head []byte) bool {
	line, _, _ := bytes.Cut(head, []byte("\n"))
	r := csv.NewReader(bytes.NewReader(line))
	cols, err := r.Read()
	if err != nil {
		return false
	}
	var hasTime, hasName, hasEvent bool
	for _, c := range cols {
		switch normalColumn(c) {
		case "eventtime":
			hasTime = true
		case "eventname":
			hasName = true
		case "cloudtrailevent":
			hasEvent = true
		}
	}
	return hasTime && hasName || hasEvent
}

// nextCSV reads the next row of the console's CSV download. With a
// CloudTrail event column the record is read from it, the other columns
// aside; else from the columns replay reads.
func (d *Decoder) nextCSV(rec *Record) error {
	if !d.started {
		d.started = true
		line, tooLong, err := d.readLine()
		if err != nil || tooLong {
			return fmt.Errorf("%w: the CSV header cannot be read", ErrUnknownFormat)
		}
		d.n++
		cols, err := csv.NewReader(bytes.NewReader(line)).Read()
		if err != nil {
			return fmt.Errorf("%w: the CSV header: %v", ErrUnknownFormat, err)
		}
		d.columns = make([]func(*Decoder, *Record, string) error, len(cols))
		whole := -1
		for i, c := range cols {
			d.columns[i] = columnSetter(c)
			if normalColumn(c) == "cloudtrailevent" {
				whole = i
			}
		}
		if whole >= 0 {
			for i := range d.columns {
				if i != whole {
					d.columns[i] = nil
				}
			}
		}
	}
	for {
		line, tooLong, err := d.readLine()
		if err != nil {
			return err
		}
		d.n++
		if tooLong {
			return &SkipError{Where: d.where(), Reason: ErrRecordTooLarge.Error()}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		r := csv.NewReader(bytes.NewReader(line))
		r.FieldsPerRecord = -1
		r.LazyQuotes = true
		cells, err := r.Read()
		if err != nil && err != io.EOF {
			return &SkipError{Where: d.where(), Reason: "not a CSV row: " + err.Error()}
		}
		*rec = Record{}
		var bad error
		for i, cell := range cells {
			if i < len(d.columns) && d.columns[i] != nil && cell != "" {
				if err := d.columns[i](d, rec, cell); err != nil {
					bad = err
				}
			}
		}
		if bad != nil {
			return &SkipError{Where: d.where(), Reason: bad.Error()}
		}
		return d.check(rec)
	}
}

// intern returns s, the copy a Decoder keeps of it when it has one.
func (d *Decoder) intern(s string) string {
	if v, ok := d.strs[s]; ok {
		return v
	}
	if len(d.strs) < maxInterned {
		d.strs[s] = s
	}
	return s
}
