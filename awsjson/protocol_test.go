package awsjson

import (
	stdjson "encoding/json"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// FuzzCheckBody checks the body check: what it accepts, every
// JSON parser reads one way (encoding/json, which lets the last duplicate
// win and replaces invalid UTF-8, agrees with the strict json v2), and its
// messages quote little of the body.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{`{}`, `{"clusters":["a"]}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `[]`, `{} {}`, ` {"a":{"b":[1,2,{"c":null}]}} `, ``, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := CheckBody(body)
		if msg != "" {
			if len(msg) > 4*MaxEcho+100 {
				t.Fatalf("a %d-byte message for a %d-byte body", len(msg), len(body))
			}
			return
		}
		if len(body) == 0 {
			return
		}
		var strict map[string]any
		if err := jsonv2.Unmarshal(body, &strict); err != nil {
			t.Fatalf("accepted %q, which json v2 rejects: %v", body, err)
		}
		var lax map[string]any
		if err := stdjson.Unmarshal(body, &lax); err != nil {
			t.Fatalf("accepted %q, which encoding/json rejects: %v", body, err)
		}
		if !reflect.DeepEqual(strict, lax) {
			t.Fatalf("accepted %q, which two parsers read differently: %v and %v", body, strict, lax)
		}
	})
}
