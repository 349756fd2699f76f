package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestDefaultCategory(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string // want: the default category, or an error's text
		ok         bool
	}{
		{"services:\n  - preset: ecs\n    upstream: http://127.0.0.1:1\n", "unlisted", true},
		{"services:\n  - preset: ecs\n    upstream: http://127.0.0.1:1\n    default_category: cluster-read\n", "cluster-read", true},
		{"services:\n  - preset: ecs\n    default_category: none\n", "", true},
		{"services:\n  - name: mine\n    default_category: other\n    categories:\n      - {name: reads, actions: [Get], capacity: 5, refill_per_second: 1}\n      - {name: other, actions: [Put], capacity: 5, refill_per_second: 1}\n", "other", true},
		{"services:\n  - preset: ecs\n    default_category: cluster-reed\n", `cfg.yaml:3:23: services[0].default_category: unknown category "cluster-reed" of service ecs (did you mean "cluster-read"?) (or none)`, false},
	} {
		c, err := Parse("cfg.yaml", []byte(tc.yaml))
		if !tc.ok {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: error %v, want %s", tc.yaml, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
			continue
		}
		s := c.Quota.Services()[0]
		if s.DefaultCategory != tc.want {
			t.Errorf("%q: default category %q, want %q", tc.yaml, s.DefaultCategory, tc.want)
		}
	}
}

// EC2 throttles with HTTP 503 RequestLimitExceeded: a service of one's
// own may too; other 5xx are not throttles.
func TestThrottleStatus503(t *testing.T) {
	const svc = "services:\n  - name: mine\n    throttle: {code: RequestLimitExceeded, status: %d}\n    categories:\n      - {name: all, actions: [Get], capacity: 5, refill_per_second: 1}\n"
	c, err := Parse("cfg.yaml", []byte(fmt.Sprintf(svc, 503)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Quota.Services()[0].Throttle.HTTPStatus; got != 503 {
		t.Errorf("status %d, want 503", got)
	}
	if _, err := Parse("cfg.yaml", []byte(fmt.Sprintf(svc, 500))); err == nil || !strings.Contains(err.Error(), "status 500 must be a 4xx, or 503") {
		t.Errorf("status 500: %v", err)
	}
}
