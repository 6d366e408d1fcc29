package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// Cert is a self-signed certificate for localhost and 127.0.0.1, for
// server and client authentication, with the CA bit set, so that it can
// also sign client certificates.
type Cert struct {
	CertPEM, KeyPEM []byte
	TLS             tls.Certificate // with Leaf
	Pool            *x509.CertPool  // trusts the certificate
	key             crypto.Signer
}

// NewCert makes a Cert with an ECDSA P-256 key.
func NewCert(t testing.TB) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return makeCert(t, key)
}

// NewRSACert makes a Cert with a 2048-bit RSA key.
func NewRSACert(t testing.TB) *Cert {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return makeCert(t, key)
}

func makeCert(t testing.TB, key crypto.Signer) *Cert {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Pool:    pool,
		key:     key,
	}
}

// ClientCert issues a client-authentication certificate named cn, signed
// by c.
func (c *Cert) ClientCert(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.TLS.Leaf, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// LoadPEM is the tls app's config that loads c.
func (c *Cert) LoadPEM() map[string]any {
	return map[string]any{"certificates": map[string]any{
		"load_pem": []any{map[string]any{"certificate": string(c.CertPEM), "key": string(c.KeyPEM)}},
	}}
}

// ClientTLS is a client TLS config that trusts c, for server name
// localhost (which the certificate also has as 127.0.0.1).
func (c *Cert) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: c.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}
