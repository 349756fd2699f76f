package node

import (
	"fmt"
	"log/slog"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/state/bolt"
)

// openDurable opens the embedded durable store of the data directory
// opts and the config's store section name (opts.DataDir unless only the
// config gives one), which keeps the Cloud Map registry and Service
// Quotas across restarts. With a Redis store Redis keeps them, and with
// no data directory memory does: it returns nil, and says so at start.
// The returned function closes it.
func openDurable(opts Options, file, st config.Store, log *slog.Logger) (*bolt.DB, func(), error) {
	dir := opts.DataDir
	if !opts.DataDirSet && file.DataDir != "" {
		dir = file.DataDir
	}
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
