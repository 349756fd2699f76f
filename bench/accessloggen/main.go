// Command accessloggen writes an HTTP access log of a known shape (package
// replay/accessgen) for measuring tollgate replay: a service at a steady
// rate with a spike every ten minutes (nine minutes at -rate, one at
// -spike), requests running 80, 150 and 400 ms in turn, until -requests
// requests, in nginx's combined format (with $request_time), ALB's or
// Envoy's, gzipped or not.
//
//	accessloggen -out /tmp/access.log -requests 10000000 -format combined
//	tollgate replay --service api /tmp/access.log
package main

import (
	"bufio"
	"compress/gzip"
	"flag"
	"io"
	"log"
	"os"
	"time"

	"github.com/tollgate/tollgate/replay/accessgen"
)

func main() {
	out := flag.String("out", "", "file to write (required)")
	requests := flag.Int64("requests", 1_000_000, "requests in the log")
	format := flag.String("format", "combined", "combined, alb or envoy")
	rate := flag.Float64("rate", 1000, "requests a second, nine minutes of every ten")
	spike := flag.Float64("spike", 5000, "requests a second, one minute of every ten")
	path := flag.String("path", "/api/orders", "every request's path")
	gz := flag.Bool("gzip", false, "gzip the log")
	flag.Parse()
	if *out == "" || *requests < 1 || !(*rate > 0) || !(*spike > 0) {
		flag.Usage()
		os.Exit(2)
	}
	var phases []accessgen.Phase
	for n := 0.0; n < float64(*requests); {
		for _, p := range []accessgen.Phase{{Duration: 9 * time.Minute, Rate: *rate}, {Duration: time.Minute, Rate: *spike}} {
			left := float64(*requests) - n
			if left <= 0 {
				break
			}
			if full := p.Rate * p.Duration.Seconds(); full > left {
				p.Duration = time.Duration(left / p.Rate * 1e9)
			}
			phases = append(phases, p)
			n += p.Rate * p.Duration.Seconds()
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var w io.Writer = bw
	var zw *gzip.Writer
	if *gz {
		zw = gzip.NewWriter(bw)
		w = zw
	}
	err = accessgen.Write(w, accessgen.Spec{Format: *format, Start: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		Host: "api.example.com", Path: *path, Phases: phases,
		Service: []time.Duration{80 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond}})
	if zw != nil && err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err)
	}
}
