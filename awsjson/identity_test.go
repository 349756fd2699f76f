package awsjson

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const exampleAuth = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab"

func TestIdentityOf(t *testing.T) {
	r := httptest.NewRequest("POST", "/", nil)
	h := r.Header
	h.Set("Authorization", exampleAuth)
	id, err := IdentityOf(r)
	if err != nil || id != (Identity{AccessKeyID: "AKIDEXAMPLE", Account: "AKIDEXAMPLE", Region: "us-east-1"}) {
		t.Fatalf("IdentityOf = %+v, %v", id, err)
	}
	h.Set(HeaderAccount, "111122223333")
	if id, _ := IdentityOf(r); id.Account != "111122223333" || id.AccessKeyID != "AKIDEXAMPLE" {
		t.Fatalf("with %s: %+v", HeaderAccount, id)
	}
	if _, err := IdentityOf(httptest.NewRequest("POST", "/", nil)); !errors.Is(err, ErrMissingAuth) {
		t.Fatalf("no Authorization: %v", err)
	}
}

func TestCheckHeaders(t *testing.T) {
	if e := CheckHeaders(http.Header{"X-Amz-Target": {"A.B"}, "Authorization": {exampleAuth}}); e != nil {
		t.Fatalf("one of each: %v", e)
	}
	for name, want := range map[string]string{"X-Amz-Target": CodeUnknownOperation, "Authorization": CodeIncompleteSignature} {
		e := CheckHeaders(http.Header{name: {"a", "b"}})
		if e == nil || e.Status != http.StatusBadRequest || e.Code != want {
			t.Errorf("two %s headers: %+v, want 400 %s", name, e, want)
		}
	}
}

func TestAuthError(t *testing.T) {
	_, err := ParseAuthorization("")
	if e := AuthError(err); e.Code != CodeMissingAuthToken || e.Status != 400 {
		t.Fatalf("missing: %+v", e)
	}
	_, err = ParseAuthorization("Basic x")
	if e := AuthError(err); e.Code != CodeIncompleteSignature {
		t.Fatalf("bad: %+v", e)
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	(&Error{Status: 429, Code: "ThrottlingException", Message: "Rate exceeded"}).Write(w)
	if w.Code != 429 || w.Header().Get("X-Amzn-ErrorType") != "ThrottlingException" ||
		w.Header().Get("Content-Type") != ContentType || w.Body.String() != `{"__type":"ThrottlingException","message":"Rate exceeded"}` ||
		w.Header().Get("Content-Length") != "58" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	if !IsContentType("application/X-Amz-Json-1.1; charset=utf-8") || IsContentType("application/json") {
		t.Fatal("IsContentType")
	}
}

// FuzzIdentityOf: any pair of headers gives a clean identity or an error
// of ParseAuthorization, never a panic.
func FuzzIdentityOf(f *testing.F) {
	f.Add(exampleAuth, "")
	f.Add(exampleAuth, "111122223333")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, auth, account string) {
		r := httptest.NewRequest("POST", "/", nil)
		h := r.Header
		h["Authorization"] = []string{auth}
		if account != "" {
			h[HeaderAccount] = []string{account}
		}
		id, err := IdentityOf(r)
		if err != nil {
			if !errors.Is(err, ErrBadAuth) && !errors.Is(err, ErrMissingAuth) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if !isWord(id.AccessKeyID, 128) || !ValidRegion(id.Region) || id.Account == "" {
			t.Fatalf("identity %+v", id)
		}
		if account != "" && id.Account != strings.TrimSpace(h.Get(HeaderAccount)) && id.Account != account {
			t.Fatalf("account %q, header %q", id.Account, account)
		}
	})
}
