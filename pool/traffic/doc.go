// Package traffic is how a service's requests are split over its
// revisions, as Knative's and Cloud Run's traffic blocks split them: the
// block itself (Target entries, checked by Check), the tags that reach a
// revision directly (RequestTag: TagHeader or a Host TAG---...), the
// client key of a sticky split (Sticky), and the resolved split
// (Routing): a weighted round robin over 100 slots, the same slots for
// one client key while the split stays.
//
// The package holds no revision of its own: Routing is generic over the
// pool's revision type, and which revisions exist, run and are kept is
// package pool's to decide.
package traffic
