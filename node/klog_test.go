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
// component=client-go, not as "I1202 …" text.
func TestClientGoLogsGoThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	routeClientGoLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(klog.ClearLogger)
	klog.InfoS("Successfully acquired lease", "lock", "demo/tollgate-hello")
	klog.Flush()
	line := strings.TrimSpace(buf.String())
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("klog line is not one JSON record: %q (%v)", line, err)
	}
	if rec["msg"] != "Successfully acquired lease" || rec["component"] != "client-go" || rec["lock"] != "demo/tollgate-hello" {
		t.Errorf("record %v", rec)
	}
}
