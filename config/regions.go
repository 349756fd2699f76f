package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/internal/suggest"
)

// regions reads the regions list: the regions tollgate serves, each entry
// a partition of AWS's (all its regions, as aws-sdk-go-v2's partition
// metadata lists them) or one region's name:
//
//	regions: [aws, onprem-east-1]      # AWS's commercial regions and a private one
//	regions: [us-east-1, eu-west-1]    # only these two
//
// Without the list, every region of every AWS partition is served.
func (p *parser) regions(v *yaml.Node, f string) *awsjson.Regions {
	if v.Kind != yaml.SequenceNode {
		p.list(v, f) // the error
		return nil
	}
	entries := v.Content
	if len(entries) == 0 {
		p.errorf(v, f, "empty: name the regions or partitions (%s) to serve, or leave the field out for every AWS region", strings.Join(awsjson.PartitionIDs(), ", "))
		return nil
	}
	ok := true
	var names []string
	seen := map[string]bool{}
	for i, n := range entries {
		ef := fmt.Sprintf("%s[%d]", f, i)
		s, good := p.str(n, ef)
		switch {
		case !good:
		case seen[s]:
			p.errorf(n, ef, "%q is given twice", s)
			good = false
		case slices.Contains(awsjson.PartitionIDs(), s):
		case !awsjson.ValidRegion(s):
			p.errorf(n, ef, "%q is neither a partition (%s) nor a region name (1-64 lowercase letters, digits or '-')", s, strings.Join(awsjson.PartitionIDs(), ", "))
			good = false
		}
		seen[s] = true
		ok = ok && good
		names = append(names, s)
	}
	if !ok {
		return nil
	}
	r, err := awsjson.NewRegions(names)
	if err != nil { // every check above ran first; this is a safety net
		p.errorf(v, f, "%v", err)
		return nil
	}
	return r
}

// defaultCloudMapRegion is the region of cloudmap.DefaultScope, where a
// cloud_map section without a region registers (a test keeps the two
// equal; config does not import the registry).
const defaultCloudMapRegion = "us-east-1"

// checkCloudMapRegion is checkRegion for a cloud_map section, whose
// instances are registered in the registry's default region when it names
// none: a client can discover them only if that region is served.
func (p *parser) checkCloudMapRegion(r *awsjson.Regions, section *yaml.Node, path string) {
	if section == nil || section.Kind != yaml.MappingNode {
		return
	}
	if valueOf(section, "region") == nil && !r.Serves(defaultCloudMapRegion) {
		p.errorf(section, joinField(path, "region"), "missing, and the registry's default region %s is not in the regions list, so no client could discover these instances: name a served region", defaultCloudMapRegion)
		return
	}
	p.checkRegion(r, section, path)
}

// checkRegion reports a region the config names elsewhere (an override's,
// a cloud_map's) that it does not serve: requests for it would all be
// refused, so the setting could never apply.
func (p *parser) checkRegion(r *awsjson.Regions, section *yaml.Node, path string) {
	n := valueOf(section, "region")
	if n == nil || n.Kind != yaml.ScalarNode || !awsjson.ValidRegion(n.Value) || r.Serves(n.Value) {
		// A malformed name is reported where the section is read.
		return
	}
	why, then := "is not in the regions list", ""
	if r == nil {
		why, then = "is not a region of AWS's partitions", "; name it in regions: to serve it"
	}
	p.errorf(n, joinField(path, "region"), "%q %s, so no request for it is served%s%s", n.Value, why, suggest.DidYouMean(n.Value, r.Names()), then)
}

// valueOf is the value node of key in mapping n, or nil.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// regionsLine says which regions are served, for WriteTable: the count
// by partition, and the private regions by name (the first 10).
func regionsLine(r *awsjson.Regions) string {
	count := map[string]int{}
	var private []string
	for _, name := range r.Names() {
		if p := r.Partition(name); p != "" {
			count[p]++
		} else {
			private = append(private, name)
		}
	}
	var parts []string
	for _, id := range awsjson.PartitionIDs() {
		if count[id] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", id, count[id]))
		}
	}
	if len(private) > 0 {
		more := ""
		if len(private) > 10 {
			private, more = private[:10], fmt.Sprintf(" and %d more", len(private)-10)
		}
		parts = append(parts, "private "+strings.Join(private, " ")+more)
	}
	return fmt.Sprintf("regions served: %d (%s)", r.Len(), strings.Join(parts, ", "))
}
