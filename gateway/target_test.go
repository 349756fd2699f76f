package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

// A call to a built-in service the config leaves out says which preset
// serves it, as check knows the presets; an unknown prefix says only that.
func TestUnknownTargetNamesThePresetThatServesIt(t *testing.T) {
	ecs, _ := quota.Preset("ecs")
	cfg, err := quota.NewConfig([]*quota.Service{ecs}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newTestServer(t, nil, Options{Config: cfg})
	for target, want := range map[string]string{
		"Route53AutoNaming_v20170314.DiscoverInstances": `unknown X-Amz-Target prefix "Route53AutoNaming_v20170314": it is the cloudmap preset's, which the config does not have: add preset cloudmap to the config ("- preset: cloudmap" under services)`,
		"ServiceQuotasV20190624.ListServices":           "add preset servicequotas to the config",
		"AmazonSQS.SendMessage":                         `unknown X-Amz-Target prefix "AmazonSQS"`,
	} {
		resp := awsRequest(t, srv.URL, target, sigv4("AKIDX", "us-east-1", "servicediscovery"), "{}")
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(readAll(t, resp.Body)), &e); err != nil || resp.StatusCode != 400 || e.Type != "UnknownOperationException" || !strings.Contains(e.Message, want) {
			t.Errorf("%s: %d %+v %v; want 400 UnknownOperationException with %q", target, resp.StatusCode, e, err, want)
		}
		if strings.HasPrefix(target, "AmazonSQS") && strings.Contains(e.Message, "preset") {
			t.Errorf("%s: %q names a preset", target, e.Message)
		}
	}
}
