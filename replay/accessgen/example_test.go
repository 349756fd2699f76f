package accessgen_test

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/tollgate/tollgate/replay/accessgen"
)

// Two requests a second for a second, in Envoy's format, the first
// running 800 ms and the second 20 ms: the second ends first and is
// written first.
func Example() {
	var b bytes.Buffer
	err := accessgen.Write(&b, accessgen.Spec{
		Format:  "envoy",
		Start:   time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Host:    "api.example.com",
		Path:    "/hello",
		Phases:  []accessgen.Phase{{Duration: time.Second, Rate: 2}},
		Service: []time.Duration{800 * time.Millisecond, 20 * time.Millisecond},
	})
	os.Stdout.Write(b.Bytes())
	fmt.Println(err)
	// Output:
	// [2026-11-30T12:00:00.500Z] "GET /hello HTTP/1.1" 200 - 0 512 20 20 "-" "accessgen" "5ab3f3c8-2d2f-4a0e-9d4a-1c7c5ad0e1f1" "api.example.com" "10.0.0.1:8080"
	// [2026-11-30T12:00:00.000Z] "GET /hello HTTP/1.1" 200 - 0 512 800 800 "-" "accessgen" "5ab3f3c8-2d2f-4a0e-9d4a-1c7c5ad0e1f1" "api.example.com" "10.0.0.1:8080"
	// <nil>
}
