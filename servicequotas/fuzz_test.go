package servicequotas

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/awsjson"
)

// FuzzAPI sends arbitrary operations and bodies: every answer is 200 with
// a JSON document or a 4xx in the AWS error shape, never a 5xx or a panic.
func FuzzAPI(f *testing.F) {
	code := QuotaCode("ecs", "cluster-read", Burst)
	for _, s := range [][2]string{
		{"ListServices", `{"MaxResults":1}`},
		{"ListServiceQuotas", `{"ServiceCode":"ecs","NextToken":"djE6Mw=="}`},
		{"ListServiceQuotas", `{"ServiceCode":"ecs","MaxResults":0}`},
		{"GetServiceQuota", `{"ServiceCode":"ecs","QuotaCode":"` + code + `"}`},
		{"RequestServiceQuotaIncrease", `{"ServiceCode":"ecs","QuotaCode":"` + code + `","DesiredValue":1e300}`},
		{"RequestServiceQuotaIncrease", `{"ServiceCode":"ecs","QuotaCode":"` + code + `","DesiredValue":77}`},
		{"ListRequestedServiceQuotaChangeHistory", `{"Status":"PENDING","NextToken":"x"}`},
		{"GetRequestedServiceQuotaChange", `{"RequestId":"nope"}`},
		{"TagResource", `{}`},
		{"TagResource", `{"ResourceARN":"arn:aws:servicequotas:us-east-1:` + awsjson.AccountID("AKIDFUZZ") + `:ecs/` + code + `","Tags":[{"Key":"k","Value":"v"}]}`},
		{"UntagResource", `{"ResourceARN":"arn:aws:servicequotas:us-east-1:123456789012:ecs/` + code + `","TagKeys":["k"]}`},
		{"ListTagsForResource", `{"ResourceARN":"arn:aws:servicequotas:us-east-1:` + awsjson.AccountID("AKIDFUZZ") + `:ecs/` + code + `"}`},
		{"StartAutoManagement", `{"OptInLevel":"ACCOUNT","OptInType":"NotifyOnly","ExclusionList":{"ecs":["L-1"]}}`},
		{"UpdateAutoManagement", `{"NotificationArn":"arn:aws:notifications::123456789012:configuration/x"}`},
		{"ListServices", `{"a":1,"a":2}`},
	} {
		f.Add(s[0], s[1])
	}
	s, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, action, body string) {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", "ServiceQuotasV20190624."+action)
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDFUZZ/20261202/us-east-1/servicequotas/aws4_request, SignedHeaders=host, Signature=ab")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		switch {
		case w.Code == 200:
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("200 with %q", w.Body)
			}
		case w.Code >= 400 && w.Code < 500:
			var e struct {
				Type string `json:"__type"`
			}
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Type == "" || w.Header().Get(awsjson.HeaderErrorType) != e.Type {
				t.Fatalf("%d not in the AWS error shape: %s", w.Code, w.Body)
			}
			if w.Body.Len() > 1024 {
				t.Fatalf("a %d-byte error", w.Body.Len())
			}
		default:
			t.Fatalf("%d for %s %q: %s", w.Code, action, body, w.Body)
		}
	})
}
