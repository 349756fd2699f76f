package ctgen_test

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/replay/ctgen"
)

// Two seconds of a tenant steady at 3 calls a second, one record a line.
func Example() {
	var b bytes.Buffer
	err := ctgen.Write(&b, ctgen.Spec{
		Start:    time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Duration: 2 * time.Second,
		Tenants:  []ctgen.Tenant{{Account: "444455556666", Action: "ListClusters", Rate: 3}},
		Lines:    true,
	})
	fmt.Println(strings.Count(b.String(), "\n"), "records,", strings.Count(b.String(), `"eventTime":"2026-11-30T12:00:01Z"`), "in the second second,", err)
	// Output: 6 records, 3 in the second second, <nil>
}
