package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/tollgate/tollgate/state/transfer"

	redisstore "github.com/tollgate/tollgate/limiter/redis"
)

func stateCommand() command {
	return command{
		summary: "export or import the durable state (Cloud Map registry, Service Quotas) of a data directory or Redis",
		run:     runState,
	}
}

// stateSynopsis is the head of `tollgate state --help`.
const stateSynopsis = `tollgate state export|import [--data-dir DIR | --store REDIS_URL] [--file FILE]

export writes the Cloud Map registry and Service Quotas' requests (their
history and reasons), applied values and tags as JSON lines (a header
line, then one record a line) to stdout or --file; import reads such a
stream into an empty data directory or Redis. Between the two, a backup
is restored, or a node's state moves to Redis for several nodes (and
back). A serving tollgate holds its data directory: export it with
GET /v1/admin/state/export (admin token), one consistent read.`

func runState(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("state")
	var dir, store, file string
	fs.StringVar(&dir, "data-dir", "", "the data `DIR` whose tollgate.db to read or write (default: $TOLLGATE_DATA_DIR, else $XDG_STATE_HOME/tollgate, else ~/.local/state/tollgate)")
	fs.StringVar(&store, "store", "", "a Redis `URL` (as serve's --store) to read or write instead of a data directory")
	fs.StringVar(&file, "file", "", "the stream's `FILE` (default: stdout for export, stdin for import)")
	if len(args) == 0 || (args[0] != "export" && args[0] != "import") {
		if code, ok := parseFlags(fs, stateSynopsis, args, stdout, stderr); !ok {
			return code // --help, or a bad flag
		}
		return usageError(stderr, "state", "want export or import")
	}
	verb := args[0]
	if code, ok := parseFlags(fs, stateSynopsis, args[1:], stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(stderr, "state", "unexpected argument %q", fs.Arg(0))
	}
	if dir != "" && store != "" {
		return usageError(stderr, "state", "give --data-dir or --store, not both")
	}
	if dir == "" && store == "" {
		if dir = defaultDataDir(); dir == "" {
			return usageError(stderr, "state", "no data directory: give --data-dir or --store")
		}
	}
	if err := stateTransfer(context.Background(), verb, dir, store, file, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "tollgate state %s: %v\n", verb, err)
		return 1
	}
	return 0
}

// stateTransfer runs one export or import.
func stateTransfer(ctx context.Context, verb, dir, store, file string, stdout, stderr io.Writer) error {
	if verb == "export" {
		out := stdout
		if file != "" {
			f, err := os.Create(file)
			if err != nil {
				return err
			}
			defer f.Close()
			out = f
		}
		if store == "" {
			return transfer.ExportBolt(dir, out)
		}
		client, err := redisstore.NewClientTLS(store, nil)
		if err != nil {
			return fmt.Errorf("--store: %w", err)
		}
		defer client.Close()
		return transfer.ExportRedis(ctx, client, out)
	}
	var in io.Reader = os.Stdin
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	var n int
	var err error
	where := dir
	if store == "" {
		n, err = transfer.ImportBolt(dir, in)
	} else {
		client, cerr := redisstore.NewClientTLS(store, nil)
		if cerr != nil {
			return fmt.Errorf("--store: %w", cerr)
		}
		defer client.Close()
		n, err = transfer.ImportRedis(ctx, client, in)
		where = store
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "tollgate state import: %d records into %s\n", n, where)
	return nil
}
