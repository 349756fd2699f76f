package awsjson

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"gopkg.in/ini.v1"
)

// MaxCredentialsBytes bounds a credentials file: a few hundred bytes a key.
const MaxCredentialsBytes = 4 << 20

// Secret is what a credentials file says of one access key.
type Secret struct {
	// Profile is the [name] of the section that gave it.
	Profile string
	// SecretAccessKey signs the key's requests.
	SecretAccessKey string
	// SessionToken, when set, must come with every request of the key
	// (X-Amz-Security-Token), as AWS requires of temporary credentials.
	SessionToken string
}

// Credentials are the access keys a server accepts and their secrets,
// read from a file in the format of the AWS shared credentials file
// (~/.aws/credentials):
//
//	[tenant-a]
//	aws_access_key_id = AKIDTENANTA
//	aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
//
// A Credentials is immutable once read.
type Credentials struct {
	file string
	keys map[string]Secret
}

// ReadCredentialsFile reads a credentials file. Errors name the file and,
// for a bad section, the section.
func ReadCredentialsFile(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCredentialsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	if len(b) > MaxCredentialsBytes {
		return nil, fmt.Errorf("credentials file %s: over %d bytes", path, MaxCredentialsBytes)
	}
	c, err := ParseCredentials(b)
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	c.file = path
	return c, nil
}

// ParseCredentials reads the shared credentials file format. Every
// section must name both aws_access_key_id and aws_secret_access_key
// (aws_session_token is optional); an access key id given in two
// sections, or a file with no key at all, is an error.
func ParseCredentials(b []byte) (*Credentials, error) {
	f, err := ini.LoadSources(ini.LoadOptions{
		AllowPythonMultilineValues: false,
		SpaceBeforeInlineComment:   true,
		Insensitive:                false,
	}, b)
	if err != nil {
		return nil, fmt.Errorf("not in the shared credentials file format: %w", err)
	}
	c := &Credentials{keys: map[string]Secret{}}
	for _, s := range f.Sections() {
		name := s.Name()
		id := s.Key("aws_access_key_id").String()
		secret := s.Key("aws_secret_access_key").String()
		if name == ini.DefaultSection && id == "" && secret == "" {
			continue // keys before the first [section]: none here
		}
		switch {
		case id == "":
			return nil, fmt.Errorf("[%s]: missing aws_access_key_id", name)
		case secret == "":
			return nil, fmt.Errorf("[%s]: missing aws_secret_access_key", name)
		case !isWord(id, 128):
			return nil, fmt.Errorf("[%s]: aws_access_key_id %s is not 1 to 128 letters, digits or '_'", name, Clip(id))
		}
		if prev, ok := c.keys[id]; ok {
			return nil, fmt.Errorf("[%s]: aws_access_key_id %s is also in [%s]", name, id, prev.Profile)
		}
		c.keys[id] = Secret{Profile: name, SecretAccessKey: secret, SessionToken: s.Key("aws_session_token").String()}
	}
	if len(c.keys) == 0 {
		return nil, errors.New("no [section] with an aws_access_key_id")
	}
	return c, nil
}

// File is the path the credentials were read from ("" when parsed from
// bytes).
func (c *Credentials) File() string { return c.file }

// Len is the number of access keys.
func (c *Credentials) Len() int { return len(c.keys) }

// Lookup returns the secret of an access key id.
func (c *Credentials) Lookup(accessKeyID string) (Secret, bool) {
	s, ok := c.keys[accessKeyID]
	return s, ok
}

// AccessKeyIDs returns the access key ids, sorted.
func (c *Credentials) AccessKeyIDs() []string {
	ids := make([]string, 0, len(c.keys))
	for id := range c.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
