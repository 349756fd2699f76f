package kube

// This file is how the replicas split each pod's maximum concurrency
// among themselves (Runner.Share) so that their shares never sum above
// it. A replica's own load is fresh while its peers' reports lag: shares
// each replica computed on its own view would sum above the pod's limit
// when load starts everywhere at once. So the leader alone splits, from
// one view of every fresh replica's reported load, and publishes the
// split (an assignment) in its report; each replica applies its own part
// and reports which assignment it applies. The leader lowers parts first
// and raises them only once every fresh replica applies the lowered
// assignment: at every moment each replica's share is at most its share
// in both the assignment before and the one after, which sum to at most
// the pod's maximum concurrency.
//
// An assignment holds fractions, not requests, so that it holds for every
// revision's maximum concurrency: every replica turns a fraction into
// requests by the same integer rule (assignment.share).

import (
	"maps"
	"slices"
	"time"
)

// shareParts is the whole of an assignment's spare capacity: parts are
// millionths of it.
const shareParts = 1_000_000

// shareSlack is how far (in parts) the leader lets the split it wants
// drift from the one it is moving to before it moves again: loads move a
// little every second, and every move costs a round of reports.
const shareSlack = shareParts / 20

// maxShareMembers bounds an assignment read from a report (about 16
// replicas fit the report Lease).
const maxShareMembers = 256

// applyDelay is how long after a replica adopts an assignment it reports
// having applied it: the pool reads each revision's share once a second
// (pool/revision's reshare), so by then every engine of the replica
// routes by it.
const applyDelay = 1500 * time.Millisecond

// shareVersion names one published assignment: its leader and a
// generation that grows with every assignment, across leaders.
type shareVersion struct {
	Leader string `json:"leader,omitempty"`
	Gen    uint64 `json:"gen,omitempty"`
}

// assignment is the leader's split of each pod's capacity: each of
// Members replicas keeps one request, and the rest (maxConcurrency −
// Members) is split by Parts, by replica identity, in millionths that sum
// to at most shareParts. Parts names every replica the split counts; one
// it does not name (it has just joined, or has left) has part 0, and
// while it routes by one request a pod may get one more than its maximum
// concurrency until the next split names it.
type assignment struct {
	Version shareVersion   `json:"version"`
	Members int            `json:"members"`
	Parts   map[string]int `json:"parts,omitempty"`
}

// valid reports whether a, read from another replica's report, is one an
// assignment can be: 1 to maxShareMembers members, no more parts than
// members, each in [0, shareParts] and their sum at most shareParts.
func (a *assignment) valid() bool {
	if a == nil || a.Members < 1 || a.Members > maxShareMembers || len(a.Parts) > a.Members {
		return false
	}
	sum := 0
	for _, p := range a.Parts {
		if p < 0 || p > shareParts {
			return false
		}
		sum += p
	}
	return sum <= shareParts
}

// share is id's part of maxConcurrency under a: one request, and its
// part of the rest rounded down within 1/Members of a request, so that
// an even split gives max(1, maxConcurrency/Members) and the shares of
// the members never sum above maxConcurrency: Σ ⌊((mc−m)·pᵢ + ⌊(B−1)/m⌋)
// / B⌋ ≤ ⌊((mc−m)·B + B−1) / B⌋ = mc−m. It grows with id's part and
// shrinks as Members grows; with no more requests than members, one each.
func (a *assignment) share(id string, maxConcurrency int) int {
	m := max(a.Members, 1)
	if maxConcurrency <= m {
		return 1
	}
	spare := int64(maxConcurrency - m)
	return 1 + int((spare*int64(a.Parts[id])+(shareParts-1)/int64(m))/shareParts)
}

// sameSplit reports whether a and b split alike (their versions aside).
func sameSplit(a, b *assignment) bool {
	return a.Members == b.Members && maps.Equal(a.Parts, b.Parts)
}

// nearSplit reports whether a and b have the same members and no part
// differing by more than shareSlack.
func nearSplit(a, b *assignment) bool {
	if a.Members != b.Members || len(a.Parts) != len(b.Parts) {
		return false
	}
	for id, p := range a.Parts {
		q, ok := b.Parts[id]
		if !ok || max(p-q, q-p) > shareSlack {
			return false
		}
	}
	return true
}

// meet is the assignment under both a and b: the more members and each
// replica's smaller part, so every replica's share (for any maximum
// concurrency) is at most its share in a and in b.
func meet(a, b *assignment) *assignment {
	m := &assignment{Members: max(a.Members, b.Members), Parts: map[string]int{}}
	for id, p := range a.Parts {
		if q, ok := b.Parts[id]; ok {
			m.Parts[id] = min(p, q)
		}
	}
	return m
}

// splitByLoad is the assignment of ids (distinct) by weight: each its
// share of the summed weight, floored to millionths; even when even is
// set (a replica reports no load) or there is no load anywhere.
func splitByLoad(ids []string, weight map[string]float64, even bool) *assignment {
	a := &assignment{Members: max(len(ids), 1), Parts: map[string]int{}}
	total := 0.0
	for _, id := range ids {
		if w := weight[id]; w > 0 && w <= maxLoadValue {
			total += w
		}
	}
	for _, id := range ids {
		p := shareParts / max(len(ids), 1)
		if !even && total > 0 {
			w := weight[id]
			if !(w > 0 && w <= maxLoadValue) {
				w = 0
			}
			p = min(int(float64(shareParts)*w/total), shareParts)
		}
		a.Parts[id] = p
	}
	// Floors keep the sum within shareParts; float rounding could not
	// pass it by more than a part or two: take them off the largest.
	for sum(a.Parts) > shareParts {
		top := ""
		for _, id := range slices.Sorted(maps.Keys(a.Parts)) {
			if top == "" || a.Parts[id] > a.Parts[top] {
				top = id
			}
		}
		a.Parts[top]--
	}
	return a
}

func sum(parts map[string]int) int {
	s := 0
	for _, p := range parts {
		s += p
	}
	return s
}

// shareMember is one replica as the leader sees it when it splits: its
// reported load's weight (HasLoad false for a report without a load), the
// assignment it reports applying (nil from a tollgate before
// assignments), and when the leader last heard from it.
type shareMember struct {
	ID      string
	Weight  float64
	HasLoad bool
	Applied *shareVersion
	Seen    time.Time
}

// sharePlan is the leader's state of the split: the assignment it
// published last (Pub; before its first of this term, TakeOver set, the
// one it routes by: an earlier leader's, or nil) and the split it is
// moving to (Target).
type sharePlan struct {
	Pub      *assignment
	Target   *assignment
	TakeOver bool
}

// next is the plan at now for self leading members (itself among them),
// those heard from within fresh counting: the split by their weights is
// the target (kept while within shareSlack of it); the published
// assignment moves to it by lowering first (meet of the published and the
// target, published at once) and raising only once every fresh replica
// applies the published one. A leader taking over publishes the meet of
// what it adopted (or, with none, the even split) and the target first.
// A fresh replica that reports no applied version (a tollgate before
// assignments) is not waited for. next is pure: a new Pub is a new
// version; an unchanged one is the same pointer.
func (s sharePlan) next(now time.Time, fresh time.Duration, self string, members []shareMember) sharePlan {
	var ids []string
	weight := map[string]float64{}
	even := false
	var live []shareMember
	for _, m := range members {
		if now.Sub(m.Seen) >= fresh || slices.Contains(ids, m.ID) {
			continue
		}
		ids = append(ids, m.ID)
		live = append(live, m)
		weight[m.ID] = m.Weight
		even = even || !m.HasLoad
	}
	slices.Sort(ids)
	want := splitByLoad(ids, weight, even)
	if s.Target == nil || !nearSplit(s.Target, want) {
		s.Target = want
	}
	publish := func(a *assignment, gen uint64) sharePlan {
		a.Version = shareVersion{Leader: self, Gen: gen + 1}
		return sharePlan{Pub: a, Target: s.Target}
	}
	switch {
	case s.Pub == nil:
		return publish(meet(splitByLoad(ids, nil, true), s.Target), 0)
	case s.TakeOver || s.Pub.Version.Leader != self:
		return publish(meet(s.Pub, s.Target), s.Pub.Version.Gen)
	case sameSplit(s.Pub, s.Target):
		return s
	}
	if lower := meet(s.Pub, s.Target); !sameSplit(lower, s.Pub) {
		return publish(lower, s.Pub.Version.Gen)
	}
	for _, m := range live {
		if m.Applied != nil && *m.Applied != s.Pub.Version {
			return s // a replica may still route by an earlier, larger share
		}
	}
	raised := &assignment{Members: s.Target.Members, Parts: maps.Clone(s.Target.Parts)}
	return publish(raised, s.Pub.Version.Gen)
}

// shareApplier is a replica's side of the split: the assignment it routes
// by (Cur, adopted at Since) and the last one it reports applying (one
// adopted at least applyDelay ago, so every engine of the replica has
// read its share since). Pure: the time is an argument.
type shareApplier struct {
	Cur     *assignment
	Since   time.Time
	Applied shareVersion
}

// adopt makes a the assignment routed by from now, unless it already is
// (or a is nil), and reports whether it was new.
func (s *shareApplier) adopt(a *assignment, now time.Time) bool {
	if a == nil || s.Cur != nil && s.Cur.Version == a.Version {
		return false
	}
	s.applied(now)
	s.Cur, s.Since = a, now
	return true
}

// applied is the version to report at now.
func (s *shareApplier) applied(now time.Time) shareVersion {
	if s.Cur != nil && now.Sub(s.Since) >= applyDelay {
		s.Applied = s.Cur.Version
	}
	return s.Applied
}

// due is when applied changes next; zero when it will not without a new
// assignment.
func (s *shareApplier) due() time.Time {
	if s.Cur == nil || s.Cur.Version == s.Applied {
		return time.Time{}
	}
	return s.Since.Add(applyDelay)
}
