package quota

import "testing"

// TestChargesMatchMemberNamesExactly: the AWS JSON protocols name members
// exactly as the model does, and a server reads a member of another
// letter case as one it does not know, which it ignores (smithy-go's
// JSON shape deserializer looks names up exactly and skips the unknown).
// So "LaunchType" and "Count" launch nothing on Fargate: ECS's bucket
// only, and no error, whether the real member is there too or not.
func TestChargesMatchMemberNamesExactly(t *testing.T) {
	ecs, err := Preset("ecs")
	if err != nil {
		t.Fatal(err)
	}
	const crm = "cluster-resource-modify:1"
	for _, tc := range []struct{ body, want string }{
		{`{"LaunchType":"FARGATE","Count":10}`, crm},
		{`{"LAUNCHTYPE":"FARGATE","COUNT":10}`, crm},
		{`{"launchtype":"FARGATE","count":10}`, crm},
		{`{"launchType":"FARGATE","Count":10}`, crm + " fargate-run-task:1 fargate-on-demand-tasks:1"},
		{`{"LaunchType":"EC2","launchType":"FARGATE","count":3}`, crm + " fargate-run-task:1 fargate-on-demand-tasks:3"},
		{`{"launchType":"FARGATE","Count":"eleven"}`, crm + " fargate-run-task:1 fargate-on-demand-tasks:1"},
		{`{"CapacityProviderStrategy":[{"capacityProvider":"FARGATE_SPOT","weight":1}],"count":4}`, crm},
		{`{"capacityProviderStrategy":[{"CapacityProvider":"FARGATE_SPOT","weight":1}],"count":4}`, ""},
	} {
		got, err := charges(t, ecs, "RunTask", tc.body)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: charged %q, want an error (the strategy's capacityProvider is missing)", tc.body, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.body, got, err, tc.want)
		}
	}
}
