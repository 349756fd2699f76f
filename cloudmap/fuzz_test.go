package cloudmap

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// FuzzRequest sends any body to any operation of a registry that holds a
// namespace, a service and an instance: it never panics, never fails with
// a 5xx, always answers JSON, and every error code it sends is one the AWS
// SDK knows for that operation.
func FuzzRequest(f *testing.F) {
	names := Operations()
	for i, body := range []string{
		`{}`, ``, `[]`, `null`, `{"Name":"local"}`, `{"Name":"x","Vpc":"v"}`,
		`{"NamespaceName":"local","ServiceName":"web","QueryParameters":{"k":"v"},"OptionalParameters":{"a":"b"},"HealthStatus":"HEALTHY_OR_ELSE_ALL","MaxResults":1}`,
		`{"ServiceId":"srv-fuzz","InstanceId":"i-1","Attributes":{"AWS_INSTANCE_IPV4":"10.0.0.1","AWS_INSTANCE_PORT":"80"}}`,
		`{"ServiceId":"srv-fuzz","InstanceId":"i-1","Status":"UNHEALTHY"}`,
		`{"Id":"ns-fuzz"}`, `{"Id":"srv-fuzz"}`, `{"Filters":[{"Name":"TYPE","Values":["HTTP"],"Condition":"IN"}],"MaxResults":0}`,
		`{"Name":"svc","NamespaceId":"ns-fuzz","DnsConfig":{"DnsRecords":[{"Type":"A","TTL":1}]}}`,
		`{"ServiceId":"srv-fuzz","Instances":["i-1","i-1"],"NextToken":"1"}`,
		`{"MaxResults":"3"}`, `{"Attributes":{"k":1}}`, `{"OperationId":"x"}{}`,
		`{"Name":"a.example.com","Properties":{"DnsProperties":{"SOA":{"TTL":5}}},"Tags":[{"Key":"k","Value":""}]}`,
		`{"Id":"ns-fuzz","UpdaterRequestId":"u","Namespace":{"Description":"d","Properties":{"DnsProperties":{"SOA":{"TTL":1}}}}}`,
		`{"Id":"srv-fuzz","Service":{"Description":"d","DnsConfig":{"DnsRecords":[{"Type":"A","TTL":1}]},"HealthCheckConfig":{"Type":"TCP"}}}`,
		`{"ServiceId":"srv-fuzz","Attributes":{"a":"b"}}`, `{"ServiceId":"srv-fuzz","Attributes":["a"]}`,
		`{"Filters":[{"Name":"UPDATE_DATE","Condition":"BETWEEN","Values":["0","9e9"]},{"Name":"STATUS","Values":["SUCCESS"]}]}`,
		`{"ResourceARN":"arn:aws:servicediscovery:us-east-1:000000000000:service/srv-fuzz","Tags":[{"Key":"a","Value":"b"}],"TagKeys":["a"]}`,
		`{"ServiceId":"srv-fuzz","InstanceId":"i-2","CreatorRequestId":"r","Attributes":{"AWS_INIT_HEALTH_STATUS":"UNHEALTHY","e":""}}`,
	} {
		f.Add(uint8(i), body)
		f.Add(uint8(i+7), body)
	}
	f.Fuzz(func(t *testing.T, op uint8, body string) {
		r, err := New(Options{Rand: bytes.NewReader(bytes.Repeat([]byte{7}, 1<<12))})
		if err != nil {
			t.Fatal(err)
		}
		seed(t, r)
		name := names[int(op)%len(names)]
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
		req.Header.Set("X-Amz-Target", TargetPrefix+"."+name)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %q: status %d %s", name, body, w.Code, w.Body)
		}
		var doc map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%s %q: answer is not a JSON object: %q", name, body, w.Body)
		}
		if w.Code != 200 {
			code := w.Header().Get("X-Amzn-ErrorType")
			if code != doc["__type"] || !slices.Contains(operations[name].codes, code) {
				t.Fatalf("%s %q: error code %q (__type %v) is not one the SDK knows for it: %v", name, body, code, doc["__type"], operations[name].codes)
			}
			if msg, _ := doc["message"].(string); msg == "" {
				t.Fatalf("%s %q: error %s without a message", name, body, code)
			}
		}
	})
}

// seed puts namespace ns-fuzz "local", service srv-fuzz "web" (custom
// health) and instance i-1 in the default scope.
func seed(t *testing.T, r *Registry) {
	t.Helper()
	err := r.store.update(t.Context(), DefaultScope.key(), true, func(s *state) error {
		if err := s.putNamespace(&namespace{ID: "ns-fuzz", Name: "local", Type: "HTTP"}, codeResourceLimitExceeded); err != nil {
			return err
		}
		sv := &service{ID: "srv-fuzz", Name: "web", NamespaceID: "ns-fuzz", Type: "HTTP", HasCustom: true}
		if err := s.putService(sv, codeResourceLimitExceeded); err != nil {
			return err
		}
		return s.putInstance(sv, &instance{ID: "i-1", Attrs: map[string]string{"k": "v"}}, codeResourceLimitExceeded)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzApplyRecord reads any Redis record (field and value) into a state
// that holds a namespace, a service and an instance: a bad record is an
// error, never a panic, and the state stays usable.
func FuzzApplyRecord(f *testing.F) {
	for _, seed := range [][2]string{
		{"n:ns-1", `{"id":"ns-1","name":"x","type":"HTTP"}`}, {"s:srv-fuzz", `{"id":"srv-fuzz","name":"web"}`},
		{"r:srv-fuzz", "12"}, {"r:srv-fuzz", "x"}, {"i:srv-fuzz:i-2", `{"id":"i-2","creator_request_id":"r"}`},
		{"i:srv-fuzz:i-1", ""}, {"i:srv-none:i-1", "{}"}, {"o:op", `{"id":"op","seq":3}`}, {"t:srv-fuzz", `[{"Key":"a","Value":"b"}]`},
		{"t:srv-fuzz", `{}`}, {"s:srv-fuzz", ""}, {"x", "y"}, {"z:1", "2"}, {"i:srv-fuzz", "null"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, field, value string) {
		r, err := New(Options{Rand: bytes.NewReader(bytes.Repeat([]byte{7}, 1<<12))})
		if err != nil {
			t.Fatal(err)
		}
		seed(t, r)
		s := r.store.(*memStore).scopes[DefaultScope.key()]
		_ = applyRecord(s, field, value)
		s.reindex()
		for _, sv := range s.Services {
			if sv.Instances == nil {
				t.Fatalf("%q=%q left service %s without an instance map", field, value, sv.ID)
			}
		}
	})
}

// FuzzScope derives a request's scope from any Authorization and account
// header: the account is always a 12-digit id.
func FuzzScope(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/servicediscovery/aws4_request, SignedHeaders=host, Signature=0", "")
	f.Add("AWS4-HMAC-SHA256 Credential=123456789012/20260101/eu-west-1/servicediscovery/aws4_request, SignedHeaders=host, Signature=0", "acct")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, auth, account string) {
		r, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.Header.Set("Authorization", auth)
		req.Header.Set("X-Tollgate-Account", account)
		sc := r.scopeOf(req)
		if len(sc.Account) != 12 || strings.Trim(sc.Account, "0123456789") != "" {
			t.Fatalf("Authorization %q, account %q: account %q is not 12 digits", auth, account, sc.Account)
		}
	})
}
