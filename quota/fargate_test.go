package quota

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// charges renders Charges's answer as "category:tokens ...".
func charges(t *testing.T, s *Service, action, body string) (string, error) {
	t.Helper()
	cs, err := s.Charges(action, []byte(body), nil)
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Category.Name + ":" + strconv.FormatInt(c.Tokens, 10)
	}
	return strings.Join(parts, " "), err
}

func TestRunTaskCharges(t *testing.T) {
	ecs, err := Preset("ecs")
	if err != nil {
		t.Fatal(err)
	}
	const crm = "cluster-resource-modify:1"
	for _, tc := range []struct{ body, want string }{
		{`{}`, crm},
		{``, crm},
		{`{"launchType":"EC2","count":10}`, crm},
		{`{"launchType":"EXTERNAL"}`, crm},
		{`{"launchType":"FARGATE"}`, crm + " fargate-run-task:1 fargate-on-demand-tasks:1"},
		{`{"launchType":"FARGATE","count":10,"taskDefinition":"web:3","overrides":{"containerOverrides":[]}}`, crm + " fargate-run-task:1 fargate-on-demand-tasks:10"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE_SPOT","weight":1}],"count":7}`, crm + " fargate-run-task:1 fargate-spot-tasks:7"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"my-asg","weight":1}],"count":7}`, crm},
		// Mixed: base first, the rest by weight, each share rounded up.
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","base":2,"weight":1},{"capacityProvider":"FARGATE_SPOT","weight":3}],"count":10}`,
			crm + " fargate-run-task:1 fargate-on-demand-tasks:4 fargate-spot-tasks:6"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","weight":1},{"capacityProvider":"FARGATE_SPOT","weight":1}],"count":1}`,
			crm + " fargate-run-task:1 fargate-on-demand-tasks:1 fargate-spot-tasks:1"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","base":5},{"capacityProvider":"FARGATE_SPOT","weight":0},{"capacityProvider":"my-asg","weight":1}],"count":8}`,
			crm + " fargate-run-task:1 fargate-on-demand-tasks:5"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"my-asg","base":10,"weight":1},{"capacityProvider":"FARGATE","weight":1}],"count":10}`, crm},
	} {
		got, err := charges(t, ecs, "RunTask", tc.body)
		if err != nil || got != tc.want {
			t.Errorf("RunTask %s: charges %q, err %v; want %q", tc.body, got, err, tc.want)
		}
	}
	if got, err := charges(t, ecs, "StopTask", `{"launchType":"FARGATE","count":10}`); err != nil || got != crm {
		t.Errorf("StopTask: charges %q, err %v; want only %q", got, err, crm)
	}
	if !ecs.Weighted("RunTask") || ecs.Weighted("StartTask") {
		t.Errorf("Weighted(RunTask) = %v, Weighted(StartTask) = %v", ecs.Weighted("RunTask"), ecs.Weighted("StartTask"))
	}
}

func TestRunTaskRefusesInvalidParameters(t *testing.T) {
	ecs, _ := Preset("ecs")
	long := strings.Repeat("x", 300)
	for _, tc := range []struct{ body, code, msg string }{
		{`{"launchType":"FARGATE","count":11}`, "InvalidParameterException", "count must be between 1 and 10"},
		{`{"count":0}`, "InvalidParameterException", "got 0"},
		{`{"count":-3}`, "InvalidParameterException", "got -3"},
		{`{"count":"ten"}`, "SerializationException", "count"},
		{`{"count":1.5}`, "SerializationException", "count"},
		{`{"count":1,"count":2}`, "SerializationException", "duplicate"},
		{`{"launchType":"LAMBDA"}`, "InvalidParameterException", `"LAMBDA"`},
		{`{"launchType":"FARGATE","capacityProviderStrategy":[{"capacityProvider":"FARGATE","weight":1}]}`, "InvalidParameterException", "both"},
		{`{"capacityProviderStrategy":[{"weight":1}]}`, "InvalidParameterException", "capacityProviderStrategy[0].capacityProvider is required"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","weight":1001}]}`, "InvalidParameterException", "weight"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","base":100001,"weight":1}]}`, "InvalidParameterException", "base"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","base":1},{"capacityProvider":"FARGATE_SPOT","base":1,"weight":1}]}`, "InvalidParameterException", "only one"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","weight":1},{"capacityProvider":"FARGATE","weight":1}]}`, "InvalidParameterException", "twice"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE"}],"count":2}`, "InvalidParameterException", "weight greater than 0"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"` + long + `","weight":1}]}`, "InvalidParameterException", "longer than 255"},
		{`{"capacityProviderStrategy":[` + strings.Repeat(`{"capacityProvider":"a","weight":1},`, 20) + `{"capacityProvider":"b","weight":1}]}`, "InvalidParameterException", "at most 20"},
		{`[1]`, "SerializationException", "RunTask body: want an object, got a list"},
		{`{"capacityProviderStrategy":[{"capacityProvider":"FARGATE","weight":"x"}]}`, "SerializationException", "capacityProviderStrategy[0].weight: want a whole number, got a string"},
		{`{"count":1e30}`, "SerializationException", "count: want a whole number that fits"},
	} {
		_, err := ecs.Charges("RunTask", []byte(tc.body), nil)
		var re *RequestError
		if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(re.Message, tc.msg) {
			t.Errorf("RunTask %.80s: err %v; want %s mentioning %q", tc.body, err, tc.code, tc.msg)
		}
	}
	if _, err := ecs.Charges("Nope", nil, nil); !errors.Is(err, ErrUnknownAction) {
		t.Errorf("unknown action: err %v, want ErrUnknownAction", err)
	}
}
