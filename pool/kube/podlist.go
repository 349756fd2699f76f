package kube

// This file is how a replica's report lists its pods within a bounded
// size. Kubernetes caps all of one object's annotations together at
// 256 KiB (TotalAnnotationSizeLimitB), and every replica's report is one
// annotation on the same Lease, so a report that listed a large
// Deployment's pods one by one (≈ 30 bytes a name) would, from a few
// thousand pods across the replicas, have every replica's patch refused.

import (
	"encoding/json"
	"slices"
	"strings"
)

const (
	// maxPodsBytes bounds a report's list of pods: plain (the `pods`
	// array, which every tollgate reads) while it fits, about 370 names
	// of 30 characters; else grouped, about 1,500 pods of a
	// Deployment's usual names (8 bytes each).
	// Sixteen replicas' reports, the leader's retiring list included,
	// stay within the Lease's 256 KiB.
	maxPodsBytes = 12 << 10
	// maxRetiringBytes bounds the leader's retiring list: a scale-down
	// step lets go of at most the pods whose names fit (about 120), with
	// those of earlier steps still listed ready.
	maxRetiringBytes = 4 << 10
)

// podGroups is a list of pod names (or addresses) grouped by the prefix
// they share up to and including their last '-', '.' or ':': a
// ReplicaSet's pods share everything but their last five characters.
type podGroups map[string][]string

// splitName is name's group prefix and the rest.
func splitName(name string) (prefix, rest string) {
	i := strings.LastIndexAny(name, "-.:") + 1
	return name[:i], name[i:]
}

// jsonLen is the length of s as a JSON string: names of pods and
// addresses need no escaping, the rest are measured.
func jsonLen(s string) int {
	for i := 0; i < len(s); i++ {
		// json.Marshal escapes these, and <, > and & as \u003c etc.
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return len(b)
		}
	}
	return len(s) + 2
}

// listPods is how a report lists the sorted names within the budget:
// the plain list when it is short, else grouped; more is true when not
// every name fit (the report then lists a sorted prefix of them).
func listPods(names []string) (plain []string, grouped podGroups, more bool) {
	size := 2 // []
	for _, n := range names {
		size += jsonLen(n) + 1
	}
	if size <= maxPodsBytes {
		return names, nil, false
	}
	grouped = podGroups{}
	size = 2 // {}
	for _, n := range names {
		prefix, rest := splitName(n)
		add := jsonLen(rest) + 1
		if _, ok := grouped[prefix]; !ok {
			add += jsonLen(prefix) + 4 // "prefix":[],
		}
		if size+add > maxPodsBytes {
			return nil, grouped, true
		}
		size += add
		grouped[prefix] = append(grouped[prefix], rest)
	}
	return nil, grouped, false
}

// names is every name in g, sorted.
func (g podGroups) names() []string {
	var out []string
	for prefix, rests := range g {
		for _, r := range rests {
			out = append(out, prefix+r)
		}
	}
	slices.Sort(out)
	return out
}

// heldPods is every pod a report lists, plain or grouped, each once.
func (rep report) heldPods() []string {
	if len(rep.PodGroups) == 0 {
		return rep.Pods
	}
	all := append(slices.Clone(rep.Pods), rep.PodGroups.names()...)
	slices.Sort(all)
	return slices.Compact(all)
}

// fitRetiring is the longest tail of the sorted victims whose names fit
// in budget bytes of the retiring list (what the pods already in it
// leave of maxRetiringBytes): a step lets go of the highest names first.
func fitRetiring(victims []string, budget int) []string {
	size := 0
	for i := len(victims) - 1; i >= 0; i-- {
		size += jsonLen(victims[i]) + 1
		if size > budget {
			return victims[i+1:]
		}
	}
	return victims
}
