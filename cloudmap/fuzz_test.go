package cloudmap

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
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
