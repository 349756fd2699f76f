package limiter

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/bucket"
)

func TestCheck(t *testing.T) {
	l := bucket.MustLimit(5, 1)
	for _, tc := range []struct {
		limit bucket.Limit
		n     int64
		want  error
	}{
		{l, 0, nil}, {l, 5, nil}, {l, 6, bucket.ErrExceedsCapacity}, {l, -1, ErrInvalidRequest}, {bucket.Limit{}, 1, ErrInvalidRequest},
	} {
		if err := Check(tc.limit, tc.n); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("Check(%v, %d) = %v, want %v", tc.limit, tc.n, err, tc.want)
		}
	}
	if err := CheckBatch([]Request{{Limit: l, Tokens: 9}}, make([]bucket.Decision, 1)); err != nil {
		t.Errorf("an oversized batch item is valid (it is denied): %v", err)
	}
	if err := CheckBatch([]Request{{Limit: l, Tokens: -2}}, make([]bucket.Decision, 1)); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("negative batch item: %v", err)
	}
}
