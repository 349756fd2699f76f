package main

// -sign: the AWS path's requests signed with SigV4 by aws-sdk-go-v2's
// signer, for a server with --credentials; -write-credentials writes that
// server's credentials file.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// signedKey is the access key id of account i and signedSecret its
// secret, in the file -write-credentials writes.
func signedKey(account string) string    { return "AKID" + account }
func signedSecret(account string) string { return "secret-" + account }

// writeCredentials writes the credentials file of the -keys accounts.
func writeCredentials(path string, keys int) error {
	var b strings.Builder
	for i := range keys {
		a := fmt.Sprintf("%012d", i)
		fmt.Fprintf(&b, "[k%d]\naws_access_key_id = %s\naws_secret_access_key = %s\n", i, signedKey(a), signedSecret(a))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// signatures caches the Authorization header of each (account, action)
// at one signing time: the requests of a run are the same few signed
// calls replayed, so the load generator's CPU goes to the load. A
// signature stays valid for the 5 minutes of AWS's clock skew.
type signatures struct {
	at   time.Time
	s    *v4.Signer
	seen sync.Map // account+"."+action → Authorization
}

var signed = &signatures{at: time.Now().UTC(), s: v4.NewSigner()}

var emptyObjectSHA256 = func() string { s := sha256.Sum256([]byte("{}")); return hex.EncodeToString(s[:]) }()

// sign sets the SigV4 headers of an AWS JSON request of account whose
// body is "{}".
func (s *signatures) sign(req *http.Request, account, action string) error {
	date := s.at.Format("20060102T150405Z")
	if auth, ok := s.seen.Load(account + "." + action); ok {
		req.Header.Set("X-Amz-Date", date)
		req.Header.Set("Authorization", auth.(string))
		return nil
	}
	creds := aws.Credentials{AccessKeyID: signedKey(account), SecretAccessKey: signedSecret(account)}
	if err := s.s.SignHTTP(context.Background(), creds, req, emptyObjectSHA256, "ecs", "us-east-1", s.at); err != nil {
		return err
	}
	s.seen.Store(account+"."+action, req.Header.Get("Authorization"))
	return nil
}
