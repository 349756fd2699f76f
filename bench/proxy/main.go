// Command proxy is the other half of bench/proxy.sh: the service behind
// every proxy measured there, and the 20-line httputil.ReverseProxy that
// tollgate's pool is compared with.
//
//	proxy backend            # listens on $PORT (or -addr), answers "ok\n"
//	proxy reverseproxy -addr 127.0.0.1:9001 -to http://127.0.0.1:9000
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: proxy backend|reverseproxy [-addr HOST:PORT] [-to URL]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:"+os.Getenv("PORT"), "listen address")
	to := fs.String("to", "", "reverseproxy: the backend's URL")
	fs.Parse(os.Args[2:])
	var h http.Handler
	switch os.Args[1] {
	case "backend":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	case "reverseproxy":
		// The reference: what a Go developer writes in 20 lines, with
		// enough idle connections for the benchmark's concurrency.
		u, err := url.Parse(*to)
		if err != nil || u.Host == "" {
			log.Fatalf("-to %q: want the backend's URL", *to)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 1024
		rp.Transport = tr
		h = rp
	default:
		log.Fatalf("unknown role %q", os.Args[1])
	}
	log.Fatal(http.ListenAndServe(*addr, h))
}
