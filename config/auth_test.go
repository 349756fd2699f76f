package config

import (
	"strings"
	"testing"
)

func TestAuthSection(t *testing.T) {
	c, err := Parse("/etc/tollgate/t.yaml", []byte("services:\n  - preset: ecs\nauth:\n  credentials_file: creds/credentials\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.CredentialsFile != "/etc/tollgate/creds/credentials" {
		t.Errorf("credentials_file = %q, want it taken from the config's directory", c.Auth.CredentialsFile)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"auth:\n  credentials_file: \"\"\n", `t.yaml:4:21: auth.credentials_file: empty`},
		{"auth:\n  credential_file: x\n", `t.yaml:4:3: auth.credential_file: unknown field`},
	} {
		_, err := Parse("t.yaml", []byte("services:\n  - preset: ecs\n"+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
