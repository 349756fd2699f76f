package cloudmap_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/cloudmap"
)

func TestGoAPIErrorsWrapSentinels(t *testing.T) {
	r, err := cloudmap.New(cloudmap.Options{Limits: cloudmap.Limits{InstancesPerService: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sc := cloudmap.DefaultScope
	if err := r.RegisterInstance(ctx, sc, "ns", "svc", "a", map[string]string{"AWS_INSTANCE_PORT": "99999"}); !errors.Is(err, cloudmap.ErrInvalidInput) {
		t.Fatalf("bad port: %v, want ErrInvalidInput", err)
	}
	if err := r.RegisterInstance(ctx, sc, "ns", "bad name!", "a", nil); !errors.Is(err, cloudmap.ErrInvalidInput) {
		t.Fatalf("bad service name: %v, want ErrInvalidInput", err)
	}
	if err := r.RegisterInstance(ctx, sc, "ns", "svc", "a", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterInstance(ctx, sc, "ns", "svc", "b", nil); !errors.Is(err, cloudmap.ErrLimitExceeded) {
		t.Fatalf("second instance over a limit of 1: %v, want ErrLimitExceeded", err)
	}
	// Deregistering what is not there is not an error.
	for _, args := range [][3]string{{"ns", "svc", "zz"}, {"ns", "none", "a"}, {"none", "svc", "a"}} {
		if err := r.DeregisterInstance(ctx, sc, args[0], args[1], args[2]); err != nil {
			t.Fatalf("DeregisterInstance%v: %v", args, err)
		}
	}
	if _, err := cloudmap.New(cloudmap.Options{OperationDelay: -1}); err == nil {
		t.Fatal("a negative OperationDelay was accepted")
	}
}
