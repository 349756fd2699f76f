package replay

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/replay/ctgen"
)

// A trail as real ones are: mostly EC2 and SSM, some STS and KMS. With no
// config, replay charges them to the built-in presets and reports AWS's
// published numbers for their buckets.
func TestReplayChargesEC2AndSSMToAWSsNumbers(t *testing.T) {
	const acct = "111122223333"
	tenant := func(src, action string, rate, burst int) ctgen.Tenant {
		return ctgen.Tenant{Account: acct, AccessKey: "AKIAREAL", Source: src, Action: action, Rate: rate, Burst: burst}
	}
	spec := ctgen.Spec{Start: t0, Duration: 10 * time.Second, Tenants: []ctgen.Tenant{
		tenant("ec2.amazonaws.com", "DescribeInstances", 0, 150),  // 100 / 20: 50 throttled
		tenant("ec2.amazonaws.com", "DescribeVpcs", 10, 0),        // its own bucket, never throttled
		tenant("ec2.amazonaws.com", "RunInstances", 0, 10),        // 5 / 2: 5 throttled
		tenant("ec2.amazonaws.com", "CreateLaunchTemplate", 1, 0), // mutating 50 / 5
		tenant("ssm.amazonaws.com", "GetParameter", 60, 0),        // 40 / 40: 20 a second throttled
		tenant("sts.amazonaws.com", "AssumeRole", 5, 0),           // 600 / 600
		tenant("kms.amazonaws.com", "Decrypt", 50, 0),             // 10,000 / 10,000
		{Account: acct, AccessKey: "AKIAREAL", Source: "ec2.amazonaws.com", Action: "DescribeInstances", Rate: 1, ErrorCode: "Client.RequestLimitExceeded"},
	}}
	r, err := Run([]Input{input("trail.json", gen(t, spec))}, Options{Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.UnknownServices) != 0 || len(r.UnknownActions) != 0 {
		t.Fatalf("counted and dropped: services %v, actions %v", r.UnknownServices, r.UnknownActions)
	}
	want := map[string]struct {
		burst                      int64
		rate                       float64
		calls, throttled, recorded int64
	}{
		"ec2 non-mutating/DescribeInstances": {100, 20, 150, 50, 10},
		"ec2 non-mutating/DescribeVpcs":      {100, 20, 100, 0, 0},
		"ec2 run-instances":                  {5, 2, 10, 5, 0},
		"ec2 mutating/CreateLaunchTemplate":  {50, 5, 10, 0, 0},
		"ssm parameter-store-throughput":     {40, 40, 600, 200, 0},
		"sts requests":                       {600, 600, 50, 0, 0},
		"kms cryptographic-symmetric":        {10000, 10000, 500, 0, 0},
	}
	seen := map[string]bool{}
	for _, b := range r.Buckets {
		name := b.Service + " " + b.Category
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected bucket %s", name)
			continue
		}
		seen[name] = true
		if b.Burst != w.burst || b.Rate != w.rate || b.Calls != w.calls || b.Throttled != w.throttled || b.Recorded != w.recorded {
			t.Errorf("%s: %d/%v, %d calls, %d throttled, %d recorded; want %d/%v, %d, %d, %d",
				name, b.Burst, b.Rate, b.Calls, b.Throttled, b.Recorded, w.burst, w.rate, w.calls, w.throttled, w.recorded)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no bucket %s in the report", name)
		}
	}
}
