package node

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// client-go's klog lines come out of tollgate's slog logger, as JSON with
// component=client-go, not as "I1202 …" text; a second node's logger
// takes them over (klog's own logger is set once: it is read without a
// lock).
func TestClientGoLogsGoThroughSlog(t *testing.T) {
	var first, buf bytes.Buffer
	routeClientGoLogs(slog.New(slog.NewJSONHandler(&first, nil)))
	routeClientGoLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	klog.LoggerWithValues(klog.Background(), "lease", "l1").Info("with values")
	klog.InfoS("Successfully acquired lease", "lock", "demo/tollgate-hello")
	klog.Flush()
	if first.Len() > 0 {
		t.Errorf("the first node's logger still got %q", first.String())
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"lease":"l1"`) {
		t.Fatalf("klog lines %q: want two, the first with lease=l1", lines)
	}
	line := lines[1]
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("klog line is not one JSON record: %q (%v)", line, err)
	}
	if rec["msg"] != "Successfully acquired lease" || rec["component"] != "client-go" || rec["lock"] != "demo/tollgate-hello" {
		t.Errorf("record %v", rec)
	}
}
