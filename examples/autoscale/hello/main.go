// Command hello is the service of the autoscale example: an HTTP server
// that honours the Cloud Run container contract (listen on $PORT, stop
// gracefully on SIGTERM) and says which instance answered.
//
//	GET /            Hello from instance …
//	GET /?sleep=2s   the same, after waiting (to build up concurrency; at most 1 h)
//	GET /?work=50ms  the same, after burning that much CPU
//
// It listens on loopback (127.0.0.1:$PORT): tollgate proxies to it there,
// and nothing reaches it around tollgate. Set HOST (HOST=0.0.0.0 in a
// container) to listen elsewhere.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if d, err := time.ParseDuration(q.Get("sleep")); err == nil && d > 0 {
			select {
			case <-time.After(min(d, time.Hour)):
			case <-r.Context().Done():
				return
			}
		}
		if d, err := time.ParseDuration(q.Get("work")); err == nil && d > 0 {
			for end := time.Now().Add(min(d, 10*time.Second)); time.Now().Before(end); {
			}
		}
		fmt.Fprintf(w, "Hello from %s (revision %s, pid %d), path %s\n",
			os.Getenv("K_SERVICE"), os.Getenv("K_REVISION"), os.Getpid(), r.URL.Path)
	})
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	srv := &http.Server{Addr: net.JoinHostPort(host, port), Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Printf("hello: listening on %s", srv.Addr)
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
	}
	log.Print("hello: SIGTERM, finishing requests")
	sctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
