// Command cloudtrailgen writes a CloudTrail log of a known shape (package
// replay/ctgen) for measuring tollgate replay: tenants of which half burst
// and half call at a steady rate, one CloudTrail file, gzipped or not, per
// span of the log, as AWS delivers them.
//
//	cloudtrailgen -out /tmp/ct -minutes 60 -tenants 20 -rate 25 -burst 300 -gzip
//	tollgate replay /tmp/ct
package main

import (
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate/tollgate/replay/ctgen"
)

func main() {
	out := flag.String("out", "", "directory to write the files into (required)")
	minutes := flag.Int("minutes", 10, "minutes of traffic")
	perFile := flag.Int("file-minutes", 5, "minutes each file covers")
	tenants := flag.Int("tenants", 2, "tenants (accounts): even ones steady, odd ones bursting")
	rate := flag.Int("rate", 25, "calls a second of each steady tenant")
	burst := flag.Int("burst", 300, "calls at once, every minute, of each bursting tenant")
	lines := flag.Bool("lines", false, "one record a line (a CloudTrail Lake export) instead of {\"Records\":[…]}")
	gz := flag.Bool("gzip", false, "gzip the files, as CloudTrail delivers them")
	seconds := flag.Int("seconds", 0, "seconds of traffic, in one file, in place of -minutes (many tenants, a short log)")
	flag.Parse()
	if *out == "" || *minutes < 1 || *perFile < 1 || *tenants < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	var ts []ctgen.Tenant
	for i := range *tenants {
		t := ctgen.Tenant{Account: fmt.Sprintf("%012d", 100000000000+i), AccessKey: fmt.Sprintf("AKIA%016d", i), Action: "DescribeClusters"}
		if i%2 == 0 {
			t.Rate, t.Action = *rate, "ListClusters"
		} else {
			t.Burst, t.Every = *burst, time.Minute
		}
		ts = append(ts, t)
	}
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	if *seconds > 0 {
		name := filepath.Join(*out, "CloudTrail_us-east-1_"+start.Format("20060102T1504Z")+".json")
		if *gz {
			name += ".gz"
		}
		if err := write(name, ctgen.Spec{Start: start, Duration: time.Duration(*seconds) * time.Second, Tenants: ts, Lines: *lines}, *gz); err != nil {
			log.Fatal(err)
		}
		return
	}
	for m := 0; m < *minutes; m += *perFile {
		span := time.Duration(min(*perFile, *minutes-m)) * time.Minute
		from := start.Add(time.Duration(m) * time.Minute)
		name := filepath.Join(*out, "CloudTrail_us-east-1_"+from.Format("20060102T1504Z")+".json")
		if *gz {
			name += ".gz"
		}
		if err := write(name, ctgen.Spec{Start: from, Duration: span, Tenants: ts, Lines: *lines}, *gz); err != nil {
			log.Fatal(err)
		}
	}
}

func write(name string, s ctgen.Spec, gz bool) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	var w io.Writer = f
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(f)
		w = zw
	}
	err = ctgen.Write(w, s)
	if zw != nil && err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
