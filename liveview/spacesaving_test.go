package liveview

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

func acct(i int) quota.Key {
	return quota.Key{Service: "ecs", Account: fmt.Sprintf("%012d", i), Region: "us-east-1", Category: "cluster-read"}
}

func TestSpaceSavingExactUnderCapacity(t *testing.T) {
	s := newSpaceSaving(8)
	for i := range 8 {
		for range i + 1 {
			s.add(acct(i), 1)
		}
	}
	if s.Len() != 8 {
		t.Fatalf("%d entries, want 8", s.Len())
	}
	for _, e := range s.entries() {
		var i int
		fmt.Sscanf(e.key.Account, "%d", &i)
		if e.count != uint64(i+1) || e.err != 0 {
			t.Errorf("%s: count %d err %d, want %d and 0", e.key.Account, e.count, e.err, i+1)
		}
	}
	if s.floor() != 1 {
		t.Errorf("floor %d, want the minimum 1 once full", s.floor())
	}
}

// TestSpaceSavingGuarantees checks Metwally et al.'s bounds against exact
// counts on skewed random streams: every estimate brackets the truth, and
// every key with more than total/capacity occurrences is kept.
func TestSpaceSavingGuarantees(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		const capacity = 16
		s := newSpaceSaving(capacity)
		zipf := rand.NewZipf(rng, 1.3, 1, 500)
		truth := map[quota.Key]uint64{}
		total := 0
		for range 5000 {
			k := acct(int(zipf.Uint64()))
			n := uint64(1 + rng.IntN(3))
			s.add(k, n)
			truth[k] += n
			total += int(n)
		}
		if s.Len() != capacity {
			t.Fatalf("seed %d: %d entries, want %d", seed, s.Len(), capacity)
		}
		var sum uint64
		kept := map[quota.Key]bool{}
		for _, e := range s.entries() {
			sum += e.count
			kept[e.key] = true
			if tr := truth[e.key]; e.count < tr || e.count-e.err > tr {
				t.Errorf("seed %d: %v true %d, estimate %d err %d", seed, e.key.Account, tr, e.count, e.err)
			}
		}
		if sum != uint64(total) {
			t.Errorf("seed %d: counts sum to %d, want the stream's %d", seed, sum, total)
		}
		for k, tr := range truth {
			if !kept[k] && tr > uint64(total/capacity) {
				t.Errorf("seed %d: %v (true %d > %d) missing", seed, k.Account, tr, total/capacity)
			}
			if !kept[k] && tr > s.floor() {
				t.Errorf("seed %d: absent %v has %d > floor %d", seed, k.Account, tr, s.floor())
			}
		}
	}
}

func TestSpaceSavingClonesNewKeys(t *testing.T) {
	buf := []byte("123456789012us-east-1")
	k := quota.Key{Service: "ecs", Account: string(buf[:12]), Region: string(buf[12:]), Category: "c"}
	s := newSpaceSaving(2)
	s.add(k, 1)
	got := s.entries()[0].key
	copy(buf, "999999999999eu-west-1xx")
	if got.Account != "123456789012" || got.Region != "us-east-1" {
		t.Fatalf("entries share the caller's buffer: %v", got)
	}
}

// TestAddRecords counts a buffer of records, with runs of equal keys (each
// counted at once), against the exact counts.
func TestAddRecords(t *testing.T) {
	stream := []int{3, 3, 3, 1, 2, 2, 3, 9, 9, 9, 9, 1, 5, 6, 7, 7, 8, 3}
	s := newSpaceSaving(5)
	var buf []byte
	truth := map[quota.Key]uint64{}
	for _, i := range stream {
		buf = appendRecord(buf, acct(i))
		truth[acct(i)]++
	}
	s.addRecords(buf)
	es := s.entries()
	if len(es) != 5 {
		t.Fatalf("%d keys, want 5", len(es))
	}
	var sum uint64
	for _, e := range es {
		sum += e.count
		if tr := truth[e.key]; e.count < tr || e.count-e.err > tr {
			t.Errorf("%v true %d, estimate %d err %d", e.key.Account, tr, e.count, e.err)
		}
		if e.key == acct(3) && (e.count != 5 || e.err != 0) {
			t.Errorf("account 3 (never the minimum): %+v, want exactly 5", e)
		}
	}
	if sum != uint64(len(stream)) {
		t.Errorf("counts sum to %d, want %d", sum, len(stream))
	}

	exact := newSpaceSaving(16)
	exact.addRecords(buf)
	for _, e := range exact.entries() {
		if e.count != truth[e.key] || e.err != 0 {
			t.Errorf("under capacity: %v %d (err %d), want exactly %d", e.key.Account, e.count, e.err, truth[e.key])
		}
	}
	if len(exact.entries()) != len(truth) {
		t.Errorf("under capacity: %d keys, want %d", len(exact.entries()), len(truth))
	}
}

// FuzzRecord checks that any key survives its record form, alone and in a
// run of records.
func FuzzRecord(f *testing.F) {
	f.Add("ecs", "123456789012", "us-east-1", "cluster-read")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, svc, account, region, category string) {
		k := quota.Key{Service: svc, Account: account, Region: region, Category: category}
		if recordLen(k) > shardBuffer {
			t.Skip("longer than a buffer: Throttled drops it")
		}
		b := appendRecord(appendRecord(nil, k), acct(1))
		if len(b) != recordLen(k)+recordLen(acct(1)) {
			t.Fatalf("%d bytes, want %d", len(b), recordLen(k)+recordLen(acct(1)))
		}
		rec, rest := nextRecord(b)
		if got := decodeRecord(rec); got != k {
			t.Fatalf("decoded %+v, want %+v", got, k)
		}
		if rec, rest = nextRecord(rest); decodeRecord(rec) != acct(1) || len(rest) != 0 {
			t.Fatalf("second record %+v, rest %d bytes", decodeRecord(rec), len(rest))
		}
	})
}

func FuzzSpaceSaving(f *testing.F) {
	f.Add([]byte{1, 2, 3, 1, 1, 9, 9, 9, 9, 4})
	f.Fuzz(func(t *testing.T, stream []byte) {
		s := newSpaceSaving(4)
		truth := map[quota.Key]uint64{}
		for _, b := range stream {
			k := acct(int(b % 16))
			s.add(k, uint64(b%3)+1)
			truth[k] += uint64(b%3) + 1
		}
		for _, e := range s.entries() {
			if tr := truth[e.key]; e.count < tr || e.count-e.err > tr {
				t.Fatalf("%v true %d, estimate %d err %d", e.key.Account, tr, e.count, e.err)
			}
		}
	})
}
