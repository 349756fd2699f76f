package node

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/state/bolt"
	"github.com/tollgate/tollgate/state/transfer"
)

// openDurable opens the embedded durable store of the data directory
// opts and the config's store section name (opts.DataDir unless only the
// config gives one), which keeps the Cloud Map registry and Service
// Quotas across restarts. With a Redis store Redis keeps them, and with
// no data directory memory does: it returns nil, and says so at start.
// The returned function closes it.
func openDurable(opts Options, file, st config.Store, log *slog.Logger) (*bolt.DB, func(), error) {
	dir := dataDir(opts, file)
	switch {
	case st.URL != "memory":
		if dir != "" && (opts.DataDirSet || file.DataDir != "") {
			log.Info("state: the registry and Service Quotas are kept in Redis; the data directory is not used", "data_dir", dir)
		}
		return nil, func() {}, nil
	case dir == "":
		log.Warn("state: no data directory (--data-dir ''): the Cloud Map registry and Service Quotas requests are in memory and lost at exit")
		return nil, func() {}, nil
	}
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("--data-dir: %w", err)
	}
	log.Info("state: the Cloud Map registry and Service Quotas are kept in "+db.Path(), "data_dir", dir)
	return db, func() { db.Close() }, nil
}

// stateExport answers GET /v1/admin/state/export: the durable store's
// records as `tollgate state export` writes them, from one read
// transaction of the running store (a consistent backup while serving).
type stateExport struct{ db *bolt.DB }

func (h stateExport) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if h.db == nil {
		http.Error(w, "this node keeps no data directory (its state is in Redis or in memory): use tollgate state export --store for Redis", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	// The answer may outlast the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	if err := transfer.ExportDB(h.db, w); err != nil {
		// The status is sent: the stream ends short, without its last
		// records, and an import of it reads only what it holds.
		return
	}
}

// Help says what the endpoint gives.
func (stateExport) Help() string {
	return "the durable state (Cloud Map registry, Service Quotas) as JSON lines, one consistent read: `tollgate state import` reads it"
}

// dataDir is the data directory in force: opts.DataDir unless only the
// config's store section names one.
func dataDir(opts Options, file config.Store) string {
	if !opts.DataDirSet && file.DataDir != "" {
		return file.DataDir
	}
	return opts.DataDir
}

// checkpointFile is the name of the bucket checkpoint in a data directory.
const checkpointFile = "buckets.checkpoint"
