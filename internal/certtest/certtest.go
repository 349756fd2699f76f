// Package certtest makes certificate authorities and certificates for
// tests, with crypto/x509, so that TLS tests need no files checked in and
// no openssl. It owns the [CA] type; it never starts a server and never
// reads the clock but through time.Now for validity periods a day wide.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded.
	PEM []byte

	key *ecdsa.PrivateKey
	tb  testing.TB
}

// Pair is a certificate issued by a CA and its private key.
type Pair struct {
	// Leaf is the certificate.
	Leaf *x509.Certificate
	// CertPEM and KeyPEM are the certificate and its key, PEM-encoded.
	CertPEM, KeyPEM []byte
}

// NewCA returns a new self-signed CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("certtest: creating CA %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("certtest: parsing CA %s: %v", name, err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key, tb: tb}
}

// Issue returns a new certificate for cn, valid for a day, for servers
// and clients alike, with the loopback addresses and "localhost" as its
// names.
func (ca *CA) Issue(cn string) Pair {
	ca.tb.Helper()
	key := newKey(ca.tb)
	tmpl := &x509.Certificate{
		SerialNumber: serial(ca.tb),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.tb.Fatalf("certtest: issuing %s: %v", cn, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		ca.tb.Fatalf("certtest: parsing %s: %v", cn, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.tb.Fatalf("certtest: encoding the key of %s: %v", cn, err)
	}
	return Pair{
		Leaf:    leaf,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// Pool returns a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCA writes the CA's certificate to dir/name and returns the path.
func (ca *CA) WriteCA(dir, name string) string {
	ca.tb.Helper()
	return write(ca.tb, filepath.Join(dir, name), ca.PEM)
}

// Write writes the pair to dir/name.crt and dir/name.key and returns the
// two paths. Each file is replaced by a rename, as a certificate manager
// replaces it, so a reader never sees half a file.
func (p Pair) Write(tb testing.TB, dir, name string) (certFile, keyFile string) {
	tb.Helper()
	return write(tb, filepath.Join(dir, name+".crt"), p.CertPEM), write(tb, filepath.Join(dir, name+".key"), p.KeyPEM)
}

func write(tb testing.TB, path string, data []byte) string {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		tb.Fatalf("certtest: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatalf("certtest: %v", err)
	}
	return path
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("certtest: generating a key: %v", err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatalf("certtest: %v", err)
	}
	return n.Add(n, big.NewInt(1))
}
