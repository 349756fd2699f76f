package transfer_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/state"
	"github.com/tollgate/tollgate/state/bolt"
	"github.com/tollgate/tollgate/state/transfer"
)

// The revisions table goes from a data directory to Redis and back
// whole, and a stream naming a table no part of tollgate owns is refused
// at its line.
func TestRevisionsMoveThroughRedis(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"service":"hello","number":2,"latest":{"name":"hello-00002","template":"t2"},"traffic":[{"revision":"hello-00001","percent":90}]}`
	if err := db.Write(func(w *bolt.Writer) error { return w.Put(state.RevisionsTable, "hello", []byte(value)) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	var first bytes.Buffer
	if err := transfer.ExportBolt(dir, &first); err != nil {
		t.Fatal(err)
	}
	want := `{"table":"revisions","key":"hello","value":` + quote(value) + "}\n"
	if !strings.HasSuffix(first.String(), want) {
		t.Fatalf("export:\n%s\nwant it to end with\n%s", first.String(), want)
	}

	rs := redistest.Start(t)
	opt, err := goredis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opt)
	defer client.Close()
	ctx := context.Background()
	if n, err := transfer.ImportRedis(ctx, client, bytes.NewReader(first.Bytes())); err != nil || n != 1 {
		t.Fatalf("import into Redis: %d %v", n, err)
	}
	if _, err := transfer.ImportRedis(ctx, client, bytes.NewReader(first.Bytes())); err == nil || !strings.Contains(err.Error(), "holds revisions") {
		t.Fatalf("a second import into Redis: %v", err)
	}
	var back bytes.Buffer
	if err := transfer.ExportRedis(ctx, client, &back); err != nil {
		t.Fatal(err)
	}
	if back.String() != first.String() {
		t.Fatalf("back from Redis:\n%s\nwant\n%s", back.String(), first.String())
	}
	dir2 := t.TempDir()
	if n, err := transfer.ImportBolt(dir2, bytes.NewReader(back.Bytes())); err != nil || n != 1 {
		t.Fatalf("import into a data directory: %d %v", n, err)
	}

	bad := strings.Replace(first.String(), `"table":"revisions"`, `"table":"revision"`, 1)
	if _, err := transfer.ImportBolt(t.TempDir(), strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), `line 2: table "revision" is none of`) {
		t.Fatalf("a stream with an unknown table: %v", err)
	}
}

func quote(s string) string {
	var b bytes.Buffer
	w, _ := state.NewWriter(&b)
	w.Write(state.Record{Table: "x", Key: "k", Value: s})
	w.Flush()
	line := strings.Split(b.String(), "\n")[1]
	return line[strings.Index(line, `"value":`)+len(`"value":`) : len(line)-1]
}
