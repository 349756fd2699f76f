package process

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
)

// logLines logs each line read from r as one record of log, with
// stream=name. A line longer than MaxLogLine is logged cut, with
// truncated=true, and the rest of it is skipped; memory stays bounded.
func logLines(r io.Reader, log *slog.Logger, name string) {
	br := bufio.NewReaderSize(r, MaxLogLine)
	skipping := false // inside the rest of a line already logged cut
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !skipping {
				log.Info(string(line), "stream", name, "truncated", true)
				skipping = true
			}
			continue
		case len(line) > 0 && !skipping:
			line = bytes.TrimRight(line, "\r\n")
			log.Info(string(line), "stream", name)
		}
		skipping = false
		if err != nil {
			return
		}
	}
}
