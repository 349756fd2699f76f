package node

import (
	"fmt"
	"log/slog"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/config"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
)

// newRegistry builds the local Cloud Map registry that answers the
// cloudmap service's allowed requests: in memory, or in the Redis the
// store settings name, so that every node shares it. It is built once per
// process, so a SIGHUP reload keeps every registration. The returned
// function closes its Redis client.
func newRegistry(st config.Store, log *slog.Logger) (*cloudmap.Registry, func(), error) {
	opts := cloudmap.Options{Logger: log}
	closeFn := func() {}
	if st.URL != "memory" {
		client, err := redisstore.NewClient(st.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("--store: %w", err)
		}
		opts.Redis = client
		closeFn = func() { client.Close() }
	}
	r, err := cloudmap.New(opts)
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return r, closeFn, nil
}
