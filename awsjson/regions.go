package awsjson

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// partitions.json is aws-sdk-go-v2's partition metadata
// (internal/endpoints/awsrulesfn/partitions.json of the module version in
// go.mod), copied as is: the SDK's list of AWS regions is the source, not
// a list kept by hand. TestPartitionsAreTheSDKs fails when the copy
// differs from the module's; `go generate ./awsjson` copies it again.
//
//go:generate sh -c "cp \"$(go list -m -f '{{.Dir}}' github.com/aws/aws-sdk-go-v2)/internal/endpoints/awsrulesfn/partitions.json\" partitions.json && chmod 644 partitions.json"
//go:embed partitions.json
var partitionsJSON []byte

// Partition is one AWS partition as the SDK's partition metadata
// describes it.
type Partition struct {
	// ID names the partition: "aws", "aws-cn", "aws-us-gov", …
	ID string
	// RegionRegex matches the names of the partition's regions, as the SDK
	// uses it to place a region it does not list.
	RegionRegex *regexp.Regexp
	// Regions are the partition's regions, sorted: those the SDK lists
	// that match RegionRegex. The SDK's endpoint pseudo-regions
	// ("aws-global", "aws-cn-global", …) do not match it and are left
	// out: a signature is never scoped to them.
	Regions []string
}

// partitionsFile is the shape of partitions.json that tollgate reads.
type partitionsFile struct {
	Partitions []struct {
		ID          string              `json:"id"`
		RegionRegex string              `json:"regionRegex"`
		Regions     map[string]struct{} `json:"regions"`
	} `json:"partitions"`
}

// parsePartitions reads partition metadata in the SDK's format.
func parsePartitions(b []byte) ([]Partition, error) {
	var f partitionsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("partition metadata: %w", err)
	}
	var out []Partition
	for _, p := range f.Partitions {
		re, err := regexp.Compile(p.RegionRegex)
		if err != nil {
			return nil, fmt.Errorf("partition %s: regionRegex: %w", p.ID, err)
		}
		part := Partition{ID: p.ID, RegionRegex: re}
		for _, name := range slices.Sorted(maps.Keys(p.Regions)) {
			if re.MatchString(name) && ValidRegion(name) {
				part.Regions = append(part.Regions, name)
			}
		}
		if p.ID == "" || len(part.Regions) == 0 {
			return nil, fmt.Errorf("partition %q: no id or no region", p.ID)
		}
		out = append(out, part)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("partition metadata: no partition")
	}
	return out, nil
}

// sdkPartitions parses the embedded copy once; a test proves it parses.
var sdkPartitions = sync.OnceValues(func() ([]Partition, error) { return parsePartitions(partitionsJSON) })

// Partitions returns AWS's partitions as the SDK's metadata gives them,
// in its order ("aws" first). The caller must not change them.
func Partitions() []Partition {
	ps, err := sdkPartitions()
	if err != nil {
		// The embedded file is fixed at build time and a test parses it.
		return nil
	}
	return ps
}

// Regions is a set of regions a server serves: a request whose signature
// is scoped to (or, unsigned, that claims) any other region is refused
// with [RegionError] before it takes a token or changes any state. The
// nil *Regions is every region of every AWS partition ([AWSRegions]).
// A Regions is immutable once made.
type Regions struct {
	partition map[string]string // region -> its partition's id; "" for none
	names     []string          // sorted
}

// awsRegions is every partition's regions, made once.
var awsRegions = sync.OnceValue(func() *Regions {
	r := &Regions{partition: map[string]string{}}
	for _, p := range Partitions() {
		for _, name := range p.Regions {
			r.partition[name] = p.ID
		}
	}
	r.names = slices.Sorted(maps.Keys(r.partition))
	return r
})

// AWSRegions returns the regions of every AWS partition: tollgate's
// default.
func AWSRegions() *Regions { return awsRegions() }

// NewRegions returns the set an operator names: each entry is a
// partition's id ("aws", "aws-cn", "aws-us-gov", …), standing for all of
// its regions, or one region's name (a region of AWS's, to serve fewer,
// or one of a private cloud's, such as "onprem-east-1"). An entry that is
// neither a partition nor a region name, or one given twice, is an error
// naming it.
func NewRegions(entries []string) (*Regions, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("no region: name at least one region or partition (%s)", strings.Join(PartitionIDs(), ", "))
	}
	r := &Regions{partition: map[string]string{}}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e] {
			return nil, fmt.Errorf("%s is given twice", Clip(e))
		}
		seen[e] = true
		if p, ok := partitionByID(e); ok {
			for _, name := range p.Regions {
				r.partition[name] = p.ID
			}
			continue
		}
		if !ValidRegion(e) {
			return nil, fmt.Errorf("%s is neither a partition (%s) nor a region name (1-64 lowercase letters, digits or '-')", Clip(e), strings.Join(PartitionIDs(), ", "))
		}
		r.partition[e] = PartitionOf(e)
	}
	r.names = slices.Sorted(maps.Keys(r.partition))
	return r, nil
}

// PartitionIDs returns the ids of AWS's partitions, in the SDK's order.
func PartitionIDs() []string {
	var ids []string
	for _, p := range Partitions() {
		ids = append(ids, p.ID)
	}
	return ids
}

func partitionByID(id string) (Partition, bool) {
	for _, p := range Partitions() {
		if p.ID == id {
			return p, true
		}
	}
	return Partition{}, false
}

// PartitionOf returns the id of the partition whose RegionRegex matches
// region, as the SDK places a region (listed or not), or "" when none
// does: a private cloud's.
func PartitionOf(region string) string {
	for _, p := range Partitions() {
		if p.RegionRegex.MatchString(region) {
			return p.ID
		}
	}
	return ""
}

func (r *Regions) orAWS() *Regions {
	if r == nil {
		return AWSRegions()
	}
	return r
}

// Serves reports whether region is one of the set.
func (r *Regions) Serves(region string) bool {
	_, ok := r.orAWS().partition[region]
	return ok
}

// Names returns the regions, sorted. The caller must not change them.
func (r *Regions) Names() []string { return r.orAWS().names }

// Len is the number of regions.
func (r *Regions) Len() int { return len(r.orAWS().names) }

// Partition returns the id of the partition a served region belongs to,
// "" for a private one.
func (r *Regions) Partition(region string) string { return r.orAWS().partition[region] }

// RegionError is what AWS answers a request whose SigV4 credential scope
// names a region the endpoint does not serve: HTTP 400,
// InvalidSignatureException, "Credential should be scoped to a valid
// region, not 'REGION'. " — the AWS JSON services' words (DynamoDB and
// CloudFront KeyValueStore answers quoted in aws/aws-sdk-js#4002 and
// aws/aws-sdk-js-v3#5576; the query services say SignatureDoesNotMatch
// with the same message), trailing space included. region must be a
// valid region name (as a parsed [Credential]'s is), so that it is safe
// to quote.
func RegionError(region string) *Error {
	return &Error{http.StatusBadRequest, CodeInvalidSignature,
		"Credential should be scoped to a valid region, not '" + region + "'. "}
}
