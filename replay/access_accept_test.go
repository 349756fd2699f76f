package replay

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/replay/accessgen"
)

// The acceptance inputs, in access logs: a truncated gzip ends its file
// with an error naming it (the requests before the cut are played); a
// line with no time, or in no format, is a counted skip, its first shown;
// a file in no format replay reads is an error, not a million skips; a
// 2 GB line (64 MB with -short) is a counted skip, never held, and the
// line after it is played. The other inputs are played whole.
func TestAccessAcceptanceInputs(t *testing.T) {
	good := genLog(t, accessgen.Spec{Format: "combined", Start: noon, Path: "/hello/x", Phases: []accessgen.Phase{{Duration: 10 * time.Second, Rate: 10}}})
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(genLog(t, accessgen.Spec{Format: "envoy", Start: noon, Path: "/hello/y", Phases: []accessgen.Phase{{Duration: time.Minute, Rate: 50}}}))
	zw.Close()
	cut := z.Bytes()[:z.Len()/2]
	noTime := `1.2.3.4 - - [] "GET /hello/z HTTP/1.1" 200 5 "-" "ua" 0.1` + "\n" + string(good[:bytes.IndexByte(good, '\n')+1])
	unknown := strings.Repeat("2026-11-30 12:00:00 GET /hello/w 200 0.1\n", 2*MaxUnreadLines)
	envoyLine := `[2026-11-30T12:00:30.000Z] "GET /hello/v HTTP/1.1" 200 - 0 1 100 - "-" "ua" "id" "h" "u"` + "\n"
	huge := Input{Name: "huge.log", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(&hugeLine{n: hugeSize(), head: envoyLine + `[2026-11-30T12:00:31.000Z] "GET /`, tail: " HTTP/1.1\" 200 - 0 1 100\n" + envoyLine}), nil
	}}
	rep, err := RunScale([]Input{memInput("good.log", good), memInput("cut.log.gz", cut), memInput("notime.log", []byte(noTime)),
		memInput("unknown.log", []byte(unknown)), huge}, ScaleOptions{
		Services: []ScaleService{{Name: "hello", Backend: stepScale}}, Service: "hello",
	})
	if err != nil {
		t.Fatal(err)
	}
	var cutErr, unknownErr bool
	for _, e := range rep.Errors {
		cutErr = cutErr || strings.HasPrefix(e, "cut.log.gz: ") && strings.Contains(e, "ends early")
		unknownErr = unknownErr || strings.HasPrefix(e, "unknown.log: ") && strings.Contains(e, "not an access log") && strings.Contains(e, "2026-11-30 12:00:00 GET")
	}
	if len(rep.Errors) != 2 || !cutErr || !unknownErr {
		t.Errorf("errors %q, want cut.log.gz ending early and unknown.log in no format", rep.Errors)
	}
	if rep.Skipped != 2 || len(rep.SkipSamples) != 2 || !strings.Contains(strings.Join(rep.SkipSamples, " "), "notime.log: line 1") ||
		!strings.Contains(strings.Join(rep.SkipSamples, " "), "huge.log: line 2: line longer than") {
		t.Errorf("%d skipped: %q; want the line without a time and the huge line", rep.Skipped, rep.SkipSamples)
	}
	// 100 good, 1 after the bad time, 2 around the huge line, and the
	// truncated file's requests before its cut (some, not all 3,000).
	played := rep.Services[0].Columns[0].Requests
	if played <= 103 || played >= 103+3000 || rep.Requests != played {
		t.Errorf("%d requests played (%d read); want 103 and some of the truncated file's", played, rep.Requests)
	}
}
