package quota

import (
	"testing"

	"github.com/tollgate/tollgate/bucket"
)

func TestEC2PresetIsAWSsTable(t *testing.T) {
	c, err := NewConfig([]*Service{ec2Preset()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		action, bucket string
		capacity       int64
		refill         float64
	}{
		// Request rate limiting: every action its own bucket, sized by
		// its category.
		{"DescribeHosts", "non-mutating/DescribeHosts", 100, 20},
		{"DescribeInstances", "non-mutating/DescribeInstances", 100, 20},
		{"GetIpamPoolCidrs", "non-mutating/GetIpamPoolCidrs", 100, 20},
		{"SearchTransitGatewayRoutes", "non-mutating/SearchTransitGatewayRoutes", 100, 20},
		{"AllocateHosts", "mutating/AllocateHosts", 50, 5},
		{"CreateCapacityReservation", "mutating/CreateCapacityReservation", 50, 5},
		{"StopInstances", "mutating/StopInstances", 50, 5},
		{"AuthorizeSecurityGroupIngress", "resource-intensive/AuthorizeSecurityGroupIngress", 50, 5},
		// Uncategorized actions, their own sizes.
		{"RunInstances", "run-instances", 5, 2},
		{"TerminateInstances", "terminate-instances", 100, 5},
		{"CreateTags", "create-tags", 100, 10},
		{"AdvertiseByoipCidr", "advertise-byoip-cidr", 1, 0.1},
		{"CreateVpcEndpoint", "create-vpc-endpoint", 4, 0.3},
		{"DescribeCapacityBlockOfferings", "describe-capacity-block-offerings", 10, 0.15},
	} {
		k, l, err := c.Resolve("ec2", "111122223333", "us-east-1", tc.action)
		if err != nil {
			t.Errorf("%s: %v", tc.action, err)
			continue
		}
		if k.Category != tc.bucket || l.Capacity() != tc.capacity || l.RefillPerSecond() != tc.refill {
			t.Errorf("%s → %s %d/%v, want %s %d/%v", tc.action, k.Category, l.Capacity(), l.RefillPerSecond(), tc.bucket, tc.capacity, tc.refill)
		}
		if got, ok := c.Limit(k); !ok || got != l {
			t.Errorf("Limit(%v) = %v %v, want %v", k, got, ok, l)
		}
	}
	// Two non-mutating actions do not share a bucket.
	k1, _, _ := c.Resolve("ec2", "1", "r", "DescribeHosts")
	k2, _, _ := c.Resolve("ec2", "1", "r", "DescribeVpcs")
	if k1 == k2 {
		t.Error("DescribeHosts and DescribeVpcs share a bucket; EC2 evaluates each API on its own")
	}
	s, _ := c.Service("ec2")
	if !s.IsThrottleCode("Client.RequestLimitExceeded") || !s.IsThrottleCode("RequestLimitExceeded") || s.IsThrottleCode("ThrottlingException") {
		t.Error("EC2's throttle codes are RequestLimitExceeded and, in CloudTrail, Client.RequestLimitExceeded")
	}
	if s.Throttle.HTTPStatus != 503 {
		t.Errorf("EC2 throttles with %d, want 503", s.Throttle.HTTPStatus)
	}
}

func TestEC2ResourceBuckets(t *testing.T) {
	s := ec2Preset()
	for _, tc := range []struct {
		action, body, bucket string
		tokens               int64
	}{
		{"RunInstances", `{"instancesSet":{"items":[{"imageId":"ami-1","minCount":1,"maxCount":25}]}}`, "run-instances-resource", 25},
		{"TerminateInstances", `{"instancesSet":{"items":[{"instanceId":"i-1"},{"instanceId":"i-2"},{"instanceId":"i-3"}]}}`, "terminate-instances-resource", 3},
		{"StopInstances", `{"instancesSet":{"items":[{"instanceId":"i-1"}],"force":false}}`, "stop-instances-resource", 1},
		{"StartInstances", ``, "start-instances-resource", 1},
		{"RunInstances", `not json`, "run-instances-resource", 1},
		{"RunInstances", `{"instancesSet":{"items":[{"maxCount":999999}]}}`, "run-instances-resource", 1000},
	} {
		got, err := s.Charges(tc.action, []byte(tc.body), nil)
		if err != nil || len(got) != 2 {
			t.Errorf("%s %s: %v %v", tc.action, tc.body, got, err)
			continue
		}
		if got[1].Category.Name != tc.bucket || got[1].Tokens != tc.tokens || got[0].Tokens != 1 {
			t.Errorf("%s %s: charges %s×%d, %s×%d; want the request bucket ×1, %s×%d", tc.action, tc.body,
				got[0].Category.Name, got[0].Tokens, got[1].Category.Name, got[1].Tokens, tc.bucket, tc.tokens)
		}
	}
}

func TestRateQuotaPresets(t *testing.T) {
	c := Builtin()
	for _, tc := range []struct {
		service, action, bucket string
		capacity                int64
		refill                  float64
	}{
		{"sts", "AssumeRole", "requests", 600, 600},
		{"sts", "GetCallerIdentity", "requests", 600, 600},
		{"ssm", "GetParameter", "parameter-store-throughput", 40, 40},
		{"ssm", "GetParametersByPath", "parameter-store-throughput", 40, 40},
		{"kms", "Decrypt", "cryptographic-symmetric", 10000, 10000},
		{"kms", "GenerateDataKey", "cryptographic-symmetric", 10000, 10000},
		{"kms", "DescribeKey", "describe-key", 2000, 2000},
		{"kms", "CreateKey", "create-key", 5, 5},
		{"kms", "GetParametersForImport", "get-parameters-for-import", 1, 1},
		{"secretsmanager", "GetSecretValue", "read", 10000, 10000},
		{"secretsmanager", "DescribeSecret", "read", 10000, 10000},
		{"secretsmanager", "PutSecretValue", "write", 50, 50},
		{"secretsmanager", "GetResourcePolicy", "resource-policy", 50, 50},
	} {
		k, l, err := c.Resolve(tc.service, "111122223333", "us-east-1", tc.action)
		if err != nil {
			t.Errorf("%s %s: %v", tc.service, tc.action, err)
			continue
		}
		if k.Category != tc.bucket || l.Capacity() != tc.capacity || l.RefillPerSecond() != tc.refill {
			t.Errorf("%s %s → %s %d/%v, want %s %d/%v", tc.service, tc.action, k.Category, l.Capacity(), l.RefillPerSecond(), tc.bucket, tc.capacity, tc.refill)
		}
	}
	// Unpublished operations are not guessed at.
	if _, _, err := c.Resolve("ssm", "1", "r", "DescribeParameters"); err == nil {
		t.Error("ssm DescribeParameters resolved, but AWS publishes no rate for it")
	}
	// A rate under one call a second still admits a call.
	if l := rateLimit(0.5); l.Capacity() != 1 || l.RefillPerSecond() != 0.5 {
		t.Errorf("rateLimit(0.5) = %v", l)
	}
	for _, name := range []string{"ssm", "kms", "secretsmanager", "sts"} {
		s, _ := c.Service(name)
		if !s.IsThrottleCode(s.Throttle.Code) || s.Throttle.HTTPStatus != 400 {
			t.Errorf("%s throttle %+v", name, s.Throttle)
		}
	}
}

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{"RunInstances": "run-instances", "DescribeIdFormat": "describe-id-format", "X": "x"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzInstancesIn: any requestParameters give 1 to 1,000 tokens, and
// nothing panics.
func FuzzInstancesIn(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"instancesSet":{"items":[{"maxCount":3}]}}`,
		`{"instancesSet":{"items":[{"instanceId":"i-1"},{"instanceId":"i-2"}]}}`, `{"instancesSet":{"items":[{"maxCount":-4}]}}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if n := instancesIn(body); n < 1 || n > maxInstancesCharged {
			t.Fatalf("instancesIn(%q) = %d", body, n)
		}
	})
}

// An override of a per-action category applies to each of its buckets;
// one naming category/action to that bucket alone.
func TestOverridesOfPerActionBuckets(t *testing.T) {
	c, err := NewConfig([]*Service{ec2Preset()}, []Override{
		{Service: "ec2", Account: "1", Category: "non-mutating", Limit: bucket.MustLimit(200, 40)},
		{Service: "ec2", Account: "1", Category: "non-mutating/DescribeHosts", Limit: bucket.MustLimit(300, 60)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for action, want := range map[string]int64{"DescribeHosts": 300, "DescribeVpcs": 200} {
		if _, l, _ := c.Resolve("ec2", "1", "r", action); l.Capacity() != want {
			t.Errorf("%s: capacity %d, want %d", action, l.Capacity(), want)
		}
		if _, l, _ := c.Resolve("ec2", "2", "r", action); l.Capacity() != 100 {
			t.Errorf("%s of another account: capacity %d, want the default 100", action, l.Capacity())
		}
	}
	if _, err := NewConfig([]*Service{ec2Preset()}, []Override{{Service: "ec2", Account: "1", Category: "non-mutating/RunInstances", Limit: bucket.MustLimit(1, 1)}}, nil); err == nil {
		t.Error("an override of non-mutating/RunInstances, which is not non-mutating, was accepted")
	}
}
