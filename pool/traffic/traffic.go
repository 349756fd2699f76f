package traffic

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// ErrInvalidSpec is wrapped by the errors about a traffic block or a
// Sticky; package pool's ErrInvalidSpec is the same error.
var ErrInvalidSpec = errors.New("pool: invalid service spec")

// MaxRevisions bounds the revisions a service keeps running: the latest,
// the latest ready and those its traffic names or tags. A traffic block
// that would keep more is refused.
const MaxRevisions = 10

// MaxEntries bounds the entries of a traffic block (a config's or
// a PUT's): at most MaxRevisions revisions take a share, so the rest are
// tags, and 100 entries leave room for 90 tags.
const MaxEntries = 100

// TagHeader names a tag in a request, as a TAG--- prefix of its Host
// does (a Cloud Run tagged URL): the request goes to the revision with
// that tag, whatever its percent.
const TagHeader = "X-Tollgate-Revision-Tag"

// Target is one entry of a service's traffic block, as Knative's
// and Cloud Run's: a revision by name or the latest ready revision, the
// percent of requests it takes, and an optional tag that reaches it
// directly. A tag-only entry has percent 0.
type Target struct {
	// RevisionName is a revision the pool runs, such as hello-00002.
	RevisionName string `json:"revision,omitempty"`
	// LatestRevision, instead of RevisionName, follows the latest ready
	// revision.
	LatestRevision bool `json:"latest_revision,omitempty"`
	// Percent of the service's untagged requests, 0 to 100.
	Percent int `json:"percent"`
	// Tag, when set, is a DNS label (no "--") that reaches the revision
	// by TAG---host or by TagHeader.
	Tag string `json:"tag,omitempty"`
}

// Error is a traffic block the pool refuses; Entry is the index
// of the entry at fault, or -1 for the block as a whole. It wraps
// ErrInvalidSpec.
type Error struct {
	Service string // the service whose traffic is refused
	Entry   int    // the entry at fault, or -1
	Msg     string // why, without the service and entry
}

// Error says which service, which entry and why.
func (e *Error) Error() string {
	if e.Entry < 0 {
		return fmt.Sprintf("service %s: traffic: %s", e.Service, e.Msg)
	}
	return fmt.Sprintf("service %s: traffic[%d]: %s", e.Service, e.Entry, e.Msg)
}

// Unwrap returns ErrInvalidSpec.
func (e *Error) Unwrap() error { return ErrInvalidSpec }

// TagPattern is what a tag must match: a DNS label, lower case, without
// "--" (so that the first "---" of a Host ends the tag).
var TagPattern = regexp.MustCompile(`^[a-z]([a-z0-9]|-[a-z0-9]){0,62}$`)

// Check checks a traffic block on its own: at most
// MaxEntries entries, each naming one revision or the latest,
// percents in [0, 100] summing to 100, tags valid and unique, a percent-0
// entry tagged, and at most MaxRevisions revisions. Whether the
// named revisions exist is the pool's to check.
func Check(service string, t []Target) error {
	if len(t) == 0 {
		return nil
	}
	bad := func(i int, format string, args ...any) error {
		return &Error{Service: service, Entry: i, Msg: fmt.Sprintf(format, args...)}
	}
	if len(t) > MaxEntries {
		return bad(-1, "%d entries; at most %d", len(t), MaxEntries)
	}
	sum := 0
	tags := map[string]int{}
	revs := map[string]bool{}
	for i, e := range t {
		switch {
		case e.LatestRevision == (e.RevisionName != ""):
			return bad(i, "give either revision or latest_revision: true")
		case e.Percent < 0 || e.Percent > 100:
			return bad(i, "percent %d not in [0, 100]", e.Percent)
		case e.Percent == 0 && e.Tag == "":
			return bad(i, "percent 0 without a tag reaches nothing")
		case e.Tag != "" && !TagPattern.MatchString(e.Tag):
			return bad(i, "tag %q is not a lower-case DNS label without \"--\"", e.Tag)
		case e.RevisionName != "" && !strings.HasPrefix(e.RevisionName, service+"-"):
			return bad(i, "revision %q is not one of service %s (%s-00001, ...)", e.RevisionName, service, service)
		}
		if j, dup := tags[e.Tag]; dup && e.Tag != "" {
			return bad(i, "tag %q already given to entry %d", e.Tag, j)
		}
		tags[e.Tag] = i
		revs[e.RevisionName] = true // "" is the latest
		sum += e.Percent
	}
	if sum != 100 {
		return bad(-1, "percents sum to %d, not 100", sum)
	}
	if len(revs) > MaxRevisions {
		return bad(-1, "%d revisions; a service keeps at most %d", len(revs), MaxRevisions)
	}
	return nil
}

// RequestTag is the tag a request names, in lower case (tags are DNS
// labels, and DNS is case-insensitive: CANARY---host is canary's): its
// TagHeader, else the part of its Host before "---"; "" for none.
func RequestTag(r *http.Request) string {
	if t := r.Header.Get(TagHeader); t != "" {
		return strings.ToLower(t)
	}
	if i := strings.Index(r.Host, "---"); i > 0 {
		return strings.ToLower(r.Host[:i])
	}
	return ""
}
