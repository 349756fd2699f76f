package cloudmap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/gateway"
)

// call sends one Cloud Map request to url as access key key, with the
// account the gateway mapped it to (none when account is ""), and returns
// the status and the error code.
func call(t *testing.T, url, key, account, op, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+"."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20260101/us-east-1/servicediscovery/aws4_request, SignedHeaders=host, Signature=00")
	if account != "" {
		req.Header.Set(gateway.HeaderAccount, account)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Type string `json:"__type"`
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc.Type
}

// Made-up access keys cannot deny a named account or the autoscaler room:
// with the default limits, many unknown keys each create namespaces
// (once the registry held 64 account/region scopes, and then refused
// everyone else), and afterwards an account mapped in access_keys still
// creates its namespace and the autoscaler still registers.
func TestMadeUpKeysCannotDenyNamedAccounts(t *testing.T) {
	r, err := cloudmap.New(cloudmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	for i := range 100 {
		call(t, srv.URL, fmt.Sprintf("AKIDMADEUP%04d", i), "", "CreateHttpNamespace", `{"Name":"squat"}`)
	}
	if code, typ := call(t, srv.URL, "AKIDREAL", "123456789012", "CreateHttpNamespace", `{"Name":"mine"}`); code != 200 {
		t.Fatalf("a named account after 100 made-up keys: %d %s", code, typ)
	}
	if err := r.RegisterInstance(context.Background(), cloudmap.Scope{Account: "autoscaled", Region: "us-east-1"}, "pool", "web", "i-1", nil); err != nil {
		t.Fatalf("the autoscaler's registration after 100 made-up keys: %v", err)
	}
	if code, typ := call(t, srv.URL, "AKIDREAL", "123456789012", "GetNamespace", `{"Id":"none"}`); typ != "NamespaceNotFound" {
		t.Fatalf("GetNamespace: %d %s", code, typ)
	}
}

// Each account has AWS's per-account quota of 50 namespaces; the accounts
// of unknown keys together hold at most UnknownBytes, and each at most
// UnknownAccountBytes, while named accounts are never refused for it. Room
// given back by a deletion can be taken again.
func TestUnknownAccountsShareABoundedBudget(t *testing.T) {
	r, err := cloudmap.New(cloudmap.Options{Limits: cloudmap.Limits{UnknownBytes: 64 << 10, UnknownAccountBytes: 16 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	// A named account: 50 namespaces, then AWS's quota.
	for i := range 50 {
		if code, typ := call(t, srv.URL, "AKIDREAL", "123456789012", "CreateHttpNamespace", fmt.Sprintf(`{"Name":"ns%d"}`, i)); code != 200 {
			t.Fatalf("namespace %d of a named account: %d %s", i, code, typ)
		}
	}
	if _, typ := call(t, srv.URL, "AKIDREAL", "123456789012", "CreateHttpNamespace", `{"Name":"ns50"}`); typ != "ResourceLimitExceeded" {
		t.Fatalf("the 51st namespace: %s, want ResourceLimitExceeded", typ)
	}
	// One unknown key fills its share before its 50 namespaces.
	refused := -1
	for i := range 50 {
		if _, typ := call(t, srv.URL, "AKIDONE", "", "CreateHttpNamespace", fmt.Sprintf(`{"Name":"n%d","Description":"%s"}`, i, strings.Repeat("d", 1000))); typ == "ResourceLimitExceeded" {
			refused = i
			break
		}
	}
	if refused < 1 {
		t.Fatalf("an unknown key's namespaces were refused at %d, want after some but before its share ran out", refused)
	}
	// Many unknown keys fill the shared budget; then unknown keys are
	// refused and a named account is not.
	full := false
	for i := 0; i < 100 && !full; i++ {
		for j := range 20 {
			if _, typ := call(t, srv.URL, fmt.Sprintf("AKIDMANY%d", i), "", "CreateHttpNamespace", fmt.Sprintf(`{"Name":"n%d","Description":"%s"}`, j, strings.Repeat("d", 1000))); typ == "ResourceLimitExceeded" {
				full = j == 0
				break
			}
		}
	}
	if !full {
		t.Fatal("100 unknown keys never filled a 64 KiB budget")
	}
	if code, typ := call(t, srv.URL, "AKIDOTHER", "210987654321", "CreateHttpNamespace", `{"Name":"x"}`); code != 200 {
		t.Fatalf("a named account with the unknown budget full: %d %s", code, typ)
	}
}
