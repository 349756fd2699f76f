package replay

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/replay/ctgen"
)

var small = ctgen.Spec{Start: t0, Duration: 5 * time.Second, Tenants: []ctgen.Tenant{
	{Account: "111122223333", AccessKey: "AKIA1", Action: "DescribeClusters", Rate: 10},
}}

// A truncated gzip ends its file with an error naming it; the other file
// is still replayed, as are the records before the cut.
func TestTruncatedGzipIsAnErrorAndTheRestIsReplayed(t *testing.T) {
	z := gz(t, gen(t, small))
	other := small
	other.Tenants = []ctgen.Tenant{{Account: "444455556666", Action: "ListClusters", Rate: 3}}
	r, err := Run([]Input{input("cut.json.gz", z[:len(z)*2/3]), input("whole.json", gen(t, other))}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], "cut.json.gz: ") || !strings.Contains(r.Errors[0], "ends early") {
		t.Fatalf("errors %q, want one naming cut.json.gz: ends early", r.Errors)
	}
	if b := bucketOf(t, r, "444455556666"); b.Calls != 15 {
		t.Errorf("the whole file: %d calls, want 15", b.Calls)
	}
}

// A record with no eventTime is skipped, counted, and shown; the records
// around it are replayed, in both formats.
func TestRecordWithoutTimeIsACountedSkip(t *testing.T) {
	rec := `{"eventSource":"ecs.amazonaws.com","eventName":"ListClusters","awsRegion":"us-east-1","userIdentity":{"accountId":"111122223333"}%s}`
	good := strings.Replace(rec, "%s", `,"eventTime":"2026-11-30T12:00:00Z"`, 1)
	bad := strings.Replace(rec, "%s", "", 1)
	badTime := strings.Replace(rec, "%s", `,"eventTime":"yesterday"`, 1)
	for name, log := range map[string]string{
		"records": `{"Records":[` + good + "," + bad + "," + badTime + `,17,` + good + `]}`,
		"lines":   good + "\n" + bad + "\n" + badTime + "\nnot json\n\n" + good + "\n",
	} {
		r, err := Run([]Input{input(name, []byte(log))}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Replayed != 2 || r.Skipped != 3 || len(r.Errors) != 0 {
			t.Errorf("%s: %d replayed, %d skipped, errors %v; want 2, 3, none", name, r.Replayed, r.Skipped, r.Errors)
		}
		if len(r.SkipSamples) == 0 || !strings.Contains(r.SkipSamples[0], "no eventTime") {
			t.Errorf("%s: samples %q", name, r.SkipSamples)
		}
	}
}

func TestUnknownFormatIsAnError(t *testing.T) {
	for _, log := range []string{"", "eventTime,eventName\n2026-11-30,ListClusters\n", `{"Records":{}}`, `{"Events":[]}`, "\x1f\x8bnot gzip"} {
		r, err := Run([]Input{input("x.log", []byte(log)), input("ok.json", gen(t, small))}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], "x.log: ") || r.Replayed != 50 {
			t.Errorf("%q: errors %q, %d replayed; want one error naming x.log and the other file's 50 calls", log, r.Errors, r.Replayed)
		}
	}
}

// hugeLine reads as one line of n bytes inside a JSON string, then a good
// record, without holding more than a read's worth.
type hugeLine struct {
	n, off int64
	head   string
	tail   string
}

func (h *hugeLine) Read(p []byte) (int, error) {
	head, body := int64(len(h.head)), int64(len(h.head))+h.n
	total := body + int64(len(h.tail))
	if h.off >= total {
		return 0, io.EOF
	}
	i := 0
	for i < len(p) && h.off < total {
		var k int
		switch {
		case h.off < head:
			k = copy(p[i:], h.head[h.off:])
		case h.off < body:
			k = int(min(int64(len(p)-i), body-h.off))
			for j := range k {
				p[i+j] = 'x'
			}
		default:
			k = copy(p[i:], h.tail[h.off-body:])
		}
		i += k
		h.off += int64(k)
	}
	return i, nil
}

const goodLine = `{"eventTime":"2026-11-30T12:00:00Z","eventSource":"ecs.amazonaws.com","eventName":"ListClusters","awsRegion":"us-east-1","userIdentity":{"accountId":"111122223333"}}`

// hugeSize is the size of the huge line of the tests: 2 GB, or with
// -short 64 MB (64 times MaxRecordSize, in a fraction of the time).
func hugeSize() int64 {
	if testing.Short() {
		return 64 << 20
	}
	return 2 << 30
}

// A 2 GB line is skipped and counted, and the line after it replayed; a
// 2 GB record in a Records file ends that file with an error naming the
// limit. Neither is held in memory.
func TestTwoGigabyteLine(t *testing.T) {
	size := hugeSize()
	lines := func() (io.ReadCloser, error) {
		return io.NopCloser(&hugeLine{n: size, head: goodLine + "\n" + `{"eventTime":"`, tail: "\"}\n" + goodLine + "\n"}), nil
	}
	recs := func() (io.ReadCloser, error) {
		return io.NopCloser(&hugeLine{n: size, head: `{"Records":[` + goodLine + `,{"requestParameters":"`, tail: `"},` + goodLine + `]}`}), nil
	}
	r, err := Run([]Input{{Name: "lines.json", Open: lines}, {Name: "records.json", Open: recs}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Skipped != 1 || r.Replayed != 3 {
		t.Errorf("%d skipped, %d replayed; want the huge line skipped and 3 replayed (2 lines, the first record)", r.Skipped, r.Replayed)
	}
	if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], "records.json: ") || !strings.Contains(r.Errors[0], "longer than") {
		t.Errorf("errors %q, want records.json's record too long", r.Errors)
	}
}

// A Records file ends at its closing brace: members after Records are
// read and ignored, data after the object is an error.
func TestDecoderNextEnds(t *testing.T) {
	d, err := NewDecoder(strings.NewReader(`{"Records":[` + goodLine + `],"more":{"a":[1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := d.Next(&rec); err != nil || rec.Account != "111122223333" || rec.Time != t0.UnixNano() {
		t.Fatalf("first record %+v, %v", rec, err)
	}
	if err := d.Next(&rec); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
	d, _ = NewDecoder(strings.NewReader(`{"Records":[` + goodLine + `]} {}`))
	d.Next(&rec)
	if err := d.Next(&rec); err == nil || err == io.EOF {
		t.Fatalf("data after the log: %v, want an error", err)
	}
}

// An Athena export names members in lower case.
func TestAthenaLowerCaseNames(t *testing.T) {
	line := `{"eventtime":"2026-11-30T12:00:00Z","eventsource":"ecs.amazonaws.com","eventname":"ListClusters","awsregion":"us-east-1","useridentity":{"accountid":"111122223333"}}`
	d, err := NewDecoder(strings.NewReader(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := d.Next(&rec); err != nil || rec.Time != t0.UnixNano() || rec.Action != "ListClusters" || rec.Account != "111122223333" || rec.Region != "us-east-1" {
		t.Fatalf("%s: %+v, %v", line, rec, err)
	}
}

func TestEventTimeForms(t *testing.T) {
	for _, s := range []string{"2026-11-30T12:00:00Z", "2026-11-30T12:00:00.000Z", "2026-11-30 12:00:00.000", "2026-11-30T13:00:00+01:00"} {
		var d Decoder
		got, err := d.parseTime([]byte(s))
		if err != nil || got != t0.UnixNano() {
			t.Errorf("%s: %v, %v; want %v", s, time.Unix(0, got).UTC(), err, t0)
		}
	}
	for _, s := range []string{"2026-02-31T12:00:00Z", "2026-11-30T25:00:00Z", "", "1970-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2300-01-01 00:00:00", "1969-12-31T23:59:59Z"} {
		var d Decoder
		if _, err := d.parseTime([]byte(s)); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

// FuzzDecoder: any input gives records, skips, or an error, never a
// panic, and a record returned has what a replay needs.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte(`{"Records":[` + goodLine + `]}`))
	f.Add([]byte(goodLine + "\n" + goodLine))
	f.Add([]byte(`{"Records":[{"eventTime":"2026-11-30T12:00:00Z","userIdentity":null},[],"x"]}`))
	f.Add([]byte(`{"a":1,"Records":[{"eventTime":"2026-11-30 12:00:00","eventSource":"e","eventName":"n\u0041","recipientAccountId":"1"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := NewDecoder(bytes.NewReader(b))
		if err != nil {
			return
		}
		var rec Record
		for range 10_000 {
			err := d.Next(&rec)
			var skip *SkipError
			switch {
			case err == nil:
				if rec.Time == 0 || rec.Source == "" || rec.Action == "" || (rec.Account == "" && rec.AccessKey == "") {
					t.Fatalf("record without what a replay needs: %+v", rec)
				}
			case errors.As(err, &skip):
			default:
				return
			}
		}
	})
}
