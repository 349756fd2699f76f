package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Memory limits accepted by ParseBytes.
const (
	MinMemory = 4 << 20
	MaxMemory = 1 << 40
)

// ParseBytes parses a memory size as Kubernetes and Cloud Run write it: a
// whole number of bytes, or one with a suffix Ki, Mi, Gi, Ti (powers of
// 1024) or k, M, G, T (powers of 1000): 512Mi, 1Gi, 256M. It must be
// within [MinMemory, MaxMemory].
func ParseBytes(s string) (int64, error) {
	n, err := parseSize(s, MinMemory, MaxMemory)
	if err != nil {
		return 0, fmt.Errorf("%q is not a memory size in [4Mi, 1Ti] such as 512Mi", s)
	}
	return n, nil
}

// parseSize parses a size as ParseBytes does, within [lo, hi].
func parseSize(s string, lo, hi int64) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	if num == "" || len(num) > 13 || strings.TrimLeft(num, "0123456789") != "" {
		return 0, sizeError(s, lo, hi)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > hi/mult || n*mult < lo {
		return 0, sizeError(s, lo, hi)
	}
	return n * mult, nil
}
