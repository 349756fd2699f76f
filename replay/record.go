package replay

// This file reads the members of one record that a replay needs and skips
// the rest, without allocating for the strings it has seen before.

import (
	"errors"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// maxInterned bounds the strings a Decoder keeps to avoid allocating
// them again; past it, strings are allocated each time.
const maxInterned = 1 << 14

// readObject reads one record. Members are named as CloudTrail names
// them, or in lower case as Athena's CloudTrail table names its columns.
func (d *Decoder) readObject(rec *Record) error {
	*rec = Record{}
	if _, err := d.dec.ReadToken(); err != nil { // {
		return err
	}
	var recipient string
	var timeErr error
	for d.dec.PeekKind() != '}' {
		name, err := d.dec.ReadValue()
		if err != nil {
			return err
		}
		switch string(name) {
		case `"eventTime"`, `"eventtime"`:
			v, err := d.dec.ReadValue()
			if err != nil {
				return err
			}
			if v.Kind() == '"' {
				rec.Time, timeErr = d.parseTime(unquoteFast(v))
			}
		case `"eventSource"`, `"eventsource"`:
			rec.Source, err = d.str()
		case `"eventName"`, `"eventname"`:
			rec.Action, err = d.str()
		case `"awsRegion"`, `"awsregion"`:
			rec.Region, err = d.str()
		case `"errorCode"`, `"errorcode"`:
			rec.ErrorCode, err = d.str()
		case `"recipientAccountId"`, `"recipientaccountid"`:
			recipient, err = d.str()
		case `"userIdentity"`, `"useridentity"`:
			err = d.identity(rec)
		case `"userAgent"`, `"useragent"`:
			rec.UserAgent, err = d.str()
		case `"sourceIPAddress"`, `"sourceipaddress"`:
			rec.SourceIP, err = d.str()
		case `"requestParameters"`, `"requestparameters"`:
			err = d.requestParameters(rec)
		default:
			err = d.dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	if _, err := d.dec.ReadToken(); err != nil { // }
		return err
	}
	if rec.Account == "" {
		rec.Account = recipient
	}
	if timeErr != nil {
		return &SkipError{Where: d.where(), Reason: timeErr.Error()}
	}
	return nil
}

func (d *Decoder) identity(rec *Record) error {
	if d.dec.PeekKind() != '{' {
		return d.dec.SkipValue()
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return err
	}
	for d.dec.PeekKind() != '}' {
		name, err := d.dec.ReadValue()
		if err != nil {
			return err
		}
		switch string(name) {
		case `"accessKeyId"`, `"accesskeyid"`:
			rec.AccessKey, err = d.str()
		case `"accountId"`, `"accountid"`:
			rec.Account, err = d.str()
		case `"arn"`:
			rec.Principal, err = d.str()
		default:
			err = d.dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := d.dec.ReadToken()
	return err
}

// requestParameters keeps requestParameters in rec.Params: an object as
// it is, or the contents of a string holding one (Athena, Lake).
func (d *Decoder) requestParameters(rec *Record) error {
	v, err := d.dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case '{':
		d.params = append(d.params[:0], v...)
	case '"':
		b := unquoteFast(v)
		if b == nil {
			s, err := strconv.Unquote(string(v))
			if err != nil {
				return nil
			}
			b = []byte(s)
		}
		if len(b) == 0 || b[0] != '{' {
			return nil
		}
		d.params = append(d.params[:0], b...)
	default:
		return nil
	}
	rec.Params = d.params
	return nil
}

// str reads a string value ("" for null or any other kind), interned.
func (d *Decoder) str() (string, error) {
	v, err := d.dec.ReadValue()
	if err != nil || v.Kind() != '"' {
		return "", err
	}
	b := unquoteFast(v)
	if b == nil { // escapes: rare in the members replay reads
		s, err := strconv.Unquote(string(v))
		if err != nil {
			return "", nil
		}
		return s, nil
	}
	if s, ok := d.strs[string(b)]; ok {
		return s, nil
	}
	s := string(b)
	if len(d.strs) < maxInterned {
		d.strs[s] = s
	}
	return s, nil
}

// unquoteFast returns the contents of a JSON string without escapes, or
// nil when it has any.
func unquoteFast(v jsontext.Value) []byte {
	b := v[1 : len(v)-1]
	for _, c := range b {
		if c == '\\' {
			return nil
		}
	}
	return b
}

var errTimeFormat = errors.New("eventTime is not a time from 1970 to 2200 (want 2006-01-02T15:04:05Z)")

// minYear and maxYear bound an eventTime: Unix nanoseconds hold years up
// to 2262, and a replay adds retry waits to them.
const (
	minYear = 1970
	maxYear = 2200
)

// parseTime parses eventTime: RFC 3339 as CloudTrail writes it
// ("2026-11-30T12:00:01Z"), with or without fractional seconds, or with a
// space for the T as Lake and Athena print it. The last one read is
// cached: neighbouring records share their second.
func (d *Decoder) parseTime(b []byte) (int64, error) {
	if b == nil {
		return 0, errTimeFormat
	}
	if string(b) == string(d.lastTS) && d.lastT != 0 {
		return d.lastT, nil
	}
	t, ok := parseUTCSeconds(b)
	if !ok {
		s := string(b)
		var err error
		var tt time.Time
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
			if tt, err = time.Parse(layout, s); err == nil {
				break
			}
		}
		if err != nil || tt.Year() < minYear || tt.Year() > maxYear {
			return 0, errTimeFormat
		}
		t = tt.UnixNano()
	}
	if t == 0 {
		return 0, errTimeFormat
	}
	d.lastTS = append(d.lastTS[:0], b...)
	d.lastT = t
	return t, nil
}

// parseUTCSeconds parses exactly "YYYY-MM-DDTHH:MM:SSZ", CloudTrail's
// form, without time.Parse.
func parseUTCSeconds(b []byte) (int64, bool) {
	if len(b) != 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != 'Z' {
		return 0, false
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 2)
	dd, ok3 := num(8, 2)
	h, ok4 := num(11, 2)
	mi, ok5 := num(14, 2)
	s, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || y < minYear || y > maxYear || mo < 1 || mo > 12 || dd < 1 || dd > 31 || h > 23 || mi > 59 || s > 60 {
		return 0, false
	}
	t := time.Date(y, time.Month(mo), dd, h, mi, s, 0, time.UTC)
	if t.Day() != dd { // 31 February
		return 0, false
	}
	return t.UnixNano(), true
}
