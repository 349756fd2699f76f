// Command noop is the peer of bench/batch.sh: a net/http server that
// moves the bytes tollgate's batch endpoint moves and decides nothing. It
// reads each POST body to its end, as tollgate does, and answers with the
// bytes of a batch answer tollgate gave (the file -answer), so that the
// two servers read and write the same bytes per request.
//
//	noop -addr 127.0.0.1:9000 -answer answer.json
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen address")
	answer := flag.String("answer", "", "file whose bytes every request is answered with")
	flag.Parse()
	body, err := os.ReadFile(*answer)
	if err != nil {
		log.Fatal(err)
	}
	length := strconv.Itoa(len(body))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", length)
		w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*addr, h))
}
