package bolt

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's meta page, as go.etcd.io/bbolt/internal/common lays it out: a
// 16-byte page header, then magic, version, page size and flags (4 bytes
// each), the root bucket (16), the freelist's page, the high-water page
// (pgid), the transaction id (8 each) and an FNV-64a checksum of the
// meta fields before it.
const (
	metaMagic    = 0xED0CDAED
	metaAt       = 16
	metaSumAt    = metaAt + 56
	metaPageSize = metaAt + 8
	metaPgid     = metaAt + 40
	metaTxid     = metaAt + 48
)

// neededBytes reads the two meta pages of the bbolt file at path and
// returns the bytes the newest valid one says the file holds (its
// high-water page times the page size); 0 when neither is valid (bbolt
// then says why). bbolt reads pages past the end of a truncated file
// (and panics), so a truncated file is refused before bbolt opens it.
func neededBytes(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	defer f.Close()
	var best struct{ txid, need int64 }
	pageSize := int64(0)
	for i := range 2 {
		buf := make([]byte, metaSumAt+8)
		if _, err := f.ReadAt(buf, int64(i)*pageSize); err != nil && err != io.EOF {
			return 0, fmt.Errorf("reading meta page %d: %w", i, err)
		}
		le := binary.LittleEndian
		h := fnv.New64a()
		h.Write(buf[metaAt:metaSumAt])
		valid := le.Uint32(buf[metaAt:]) == metaMagic && le.Uint64(buf[metaSumAt:]) == h.Sum64()
		size := int64(le.Uint32(buf[metaPageSize:]))
		if i == 0 {
			pageSize = int64(os.Getpagesize())
			if valid && size >= 512 && size <= 1<<20 {
				pageSize = size
			}
		}
		if !valid {
			continue
		}
		if txid := int64(le.Uint64(buf[metaTxid:])); best.need == 0 || txid > best.txid {
			best.txid, best.need = txid, int64(le.Uint64(buf[metaPgid:]))*size
		}
	}
	return best.need, nil
}
