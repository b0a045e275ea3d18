package busauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The files Certificates writes.
const (
	CAFile         = "ca.pem"
	caKeyFile      = "ca-key.pem"
	ServerCertFile = "server.pem"
	ServerKeyFile  = "server-key.pem"
	ClientCertFile = "client.pem"
	ClientKeyFile  = "client-key.pem"
)

// How long what Certificates makes is valid, and how long before its end a
// certificate is made anew.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

// Certificates makes a local CA and the certificates a deployment's NATS servers
// and clients use into dir, every file mode 0600, and returns the files it made:
//
//	ca.pem, ca-key.pem          the CA (kept once made: everything else trusts it)
//	server.pem, server-key.pem  the servers' certificate, for client and route ports
//	                            alike, valid for every name and address in hosts
//	client.pem, client-key.pem  a client certificate, for servers that verify clients
//
// What exists is kept, unless a certificate is not the CA's, does not cover every
// host asked for, or ends within 30 days: that one is made again.
func Certificates(dir string, hosts []string) ([]string, error) {
	if len(hosts) == 0 {
		return nil, errors.New("busauth: certificates: at least one host name or address")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("busauth: certificates: %w", err)
	}
	var made []string
	ca, caKey, created, err := loadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	if created {
		made = append(made, CAFile, caKeyFile)
	}
	for _, leaf := range []struct {
		cert, key string
		tmpl      func() *x509.Certificate
	}{
		{ServerCertFile, ServerKeyFile, func() *x509.Certificate { return serverTemplate(hosts) }},
		{ClientCertFile, ClientKeyFile, clientTemplate},
	} {
		if leafUsable(filepath.Join(dir, leaf.cert), ca, leaf.tmpl()) {
			continue
		}
		if err := writeLeaf(dir, leaf.cert, leaf.key, leaf.tmpl(), ca, caKey); err != nil {
			return nil, err
		}
		made = append(made, leaf.cert, leaf.key)
	}
	return made, nil
}

func loadOrCreateCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, bool, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, caKeyFile)
	cert, err := readCert(certPath)
	if err == nil {
		key, err := readKey(keyPath)
		if err != nil {
			return nil, nil, false, err
		}
		return cert, key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, fmt.Errorf("busauth: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "toolgate local CA", Organization: []string{"toolgate"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, false, fmt.Errorf("busauth: CA: %w", err)
	}
	if err := writePEM(keyPath, key); err != nil {
		return nil, nil, false, err
	}
	if err := writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, nil, false, fmt.Errorf("busauth: %w", err)
	}
	cert, err = x509.ParseCertificate(der)
	return cert, key, true, err
}

func serverTemplate(hosts []string) *x509.Certificate {
	t := &x509.Certificate{
		Subject: pkix.Name{CommonName: hosts[0], Organization: []string{"toolgate"}},
		// Routes dial each other with this certificate too: it is a client's as well.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else {
			t.DNSNames = append(t.DNSNames, h)
		}
	}
	return t
}

func clientTemplate() *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: "toolgate client", Organization: []string{"toolgate"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// leafUsable reports whether the certificate at path is the CA's, covers every name
// and address want does, and is not about to end.
func leafUsable(path string, ca *x509.Certificate, want *x509.Certificate) bool {
	cert, err := readCert(path)
	if err != nil || cert.CheckSignatureFrom(ca) != nil || time.Until(cert.NotAfter) < renewBefore {
		return false
	}
	for _, n := range want.DNSNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range want.IPAddresses {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func writeLeaf(dir, certFile, keyFile string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("busauth: %s: %w", keyFile, err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(leafValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("busauth: %s: %w", certFile, err)
	}
	if err := writePEM(filepath.Join(dir, keyFile), key); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("busauth: %w", err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	return n
}

func writePEM(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("busauth: %s: %w", path, err)
	}
	if err := writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("busauth: %w", err)
	}
	return nil
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("busauth: %s: not a PEM certificate", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("busauth: %s: %w", path, err)
	}
	return cert, nil
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("busauth: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("busauth: %s: not a PEM key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("busauth: %s: %w", path, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("busauth: %s: not an ECDSA key", path)
	}
	return key, nil
}
