package logtest_test

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/tollgate/tollgate/internal/logtest"
)

func Example() {
	var buf logtest.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	log.Info("reloaded", "services", 2)
	fmt.Print(strings.TrimSpace(buf.String()))
	// Output: level=INFO msg=reloaded services=2
}
