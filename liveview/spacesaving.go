package liveview

import (
	"bytes"
	"encoding/binary"

	"github.com/tollgate/tollgate/internal/spacesaving"
	"github.com/tollgate/tollgate/quota"
)

// spaceSaving is the Space-Saving summary (package spacesaving) of a
// stream of quota keys, held in their record form (see appendRecord).
type spaceSaving struct {
	*spacesaving.Summary
	rec []byte // scratch for add
}

// hotEntry is a key with its estimated count.
type hotEntry struct {
	key   quota.Key
	count uint64 // estimated count, never below the true count
	err   uint64 // count - err is never above the true count
}

// recordHeader is the size of a record's header: the lengths of the key's
// four fields, two bytes each.
const recordHeader = 8

// recordLen is the size of k's record.
func recordLen(k quota.Key) int {
	return recordHeader + len(k.Service) + len(k.Account) + len(k.Region) + len(k.Category)
}

// appendRecord appends k's record to b: the lengths of its service,
// account, region and category (little-endian uint16 each), then their
// bytes. Every field must be shorter than 64 KiB.
func appendRecord(b []byte, k quota.Key) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(k.Service)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(k.Account)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(k.Region)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(k.Category)))
	b = append(b, k.Service...)
	b = append(b, k.Account...)
	b = append(b, k.Region...)
	return append(b, k.Category...)
}

// nextRecord splits the first record off b, which must start with a
// whole record.
func nextRecord(b []byte) (rec, rest []byte) {
	n := recordHeader
	for i := range 4 {
		n += int(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return b[:n], b[n:]
}

// decodeRecord returns the key of a record, its four strings sharing one
// allocation.
func decodeRecord(rec []byte) quota.Key {
	var n [4]int
	for i := range n {
		n[i] = int(binary.LittleEndian.Uint16(rec[2*i:]))
	}
	s := string(rec[recordHeader:])
	return quota.Key{Service: s[:n[0]], Account: s[n[0] : n[0]+n[1]],
		Region: s[n[0]+n[1] : n[0]+n[1]+n[2]], Category: s[n[0]+n[1]+n[2]:]}
}

func newSpaceSaving(capacity int) *spaceSaving {
	return &spaceSaving{Summary: spacesaving.New(capacity)}
}

// add counts n occurrences of k.
func (s *spaceSaving) add(k quota.Key, n uint64) {
	s.rec = appendRecord(s.rec[:0], k)
	s.Add(s.rec, n)
}

// addRecords counts every record of b, a run of records as appendRecord
// writes them. Equal records in a row are counted at once.
func (s *spaceSaving) addRecords(b []byte) {
	var prev []byte
	var n uint64
	for len(b) > 0 {
		var rec []byte
		rec, b = nextRecord(b)
		if n > 0 && bytes.Equal(rec, prev) {
			n++
			continue
		}
		if n > 0 {
			s.Add(prev, n)
		}
		prev, n = rec, 1
	}
	if n > 0 {
		s.Add(prev, n)
	}
}

// entries returns the summary's keys, in no particular order, with
// strings of their own.
func (s *spaceSaving) entries() []hotEntry {
	es := s.Entries()
	out := make([]hotEntry, len(es))
	for i, e := range es {
		out[i] = hotEntry{key: decodeRecord(e.Key), count: e.Count, err: e.Err}
	}
	return out
}

// floor is the most a key absent from the summary can have been counted.
func (s *spaceSaving) floor() uint64 { return s.Floor() }

// reset empties the summary.
func (s *spaceSaving) reset() { s.Reset() }
