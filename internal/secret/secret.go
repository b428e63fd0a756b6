// Package secret holds a cluster's shared secret and what is derived from it:
// the key memberlist encrypts and authenticates gossip with, and a cluster CA
// that signs each agent's TLS certificate for agent-to-agent connections.
//
// Only members know the secret, so only members can gossip, and only members
// can present a certificate the others accept. The CA's private key is derived
// from the secret (Ed25519 from a seed is deterministic), so no CA file has to
// be distributed: every agent with the secret rebuilds the same CA.
//
// It does no network I/O; ReadFile and WriteFile are its only file access.
// ReadFile refuses a file that others than its owner can read.
package secret

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"strings"
	"syscall"
	"time"
)

// Size is the number of random bytes in a secret.
const Size = 32

// Secret is a cluster's shared secret.
type Secret []byte

// ErrBad means a secret file does not hold a valid secret.
var ErrBad = errors.New("bad cluster secret")

// New makes a fresh random secret.
func New() Secret {
	s := make(Secret, Size)
	if _, err := rand.Read(s); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return s
}

// String is the file form: base64 on one line.
func (s Secret) String() string { return base64.StdEncoding.EncodeToString(s) }

// Parse reads the file form.
func Parse(text string) (Secret, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != Size {
		return nil, fmt.Errorf("%w: want %d base64-encoded bytes", ErrBad, Size)
	}
	return Secret(b), nil
}

// ReadFile reads a secret file. Whoever reads the secret can join the
// cluster and have its agents run, dump and restore any user's programs,
// so a file that anyone but its owner, the user reading it (root on a real
// node), could read or write is refused.
func ReadFile(path string) (Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	if err := checkPrivate(fi, os.Geteuid()); err != nil {
		return nil, fmt.Errorf("cluster secret %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	s, err := Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ErrExposed means a secret file others could read or change.
var ErrExposed = errors.New("exposed")

// checkPrivate refuses a secret file that is not a regular file owned by
// uid with no permission for its group or others.
func checkPrivate(fi os.FileInfo, uid int) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file", ErrExposed)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return fmt.Errorf("%w: owned by uid %d, not by uid %d who reads it (chown it)", ErrExposed, st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: mode %04o lets others read or change it (chmod 600 it)", ErrExposed, perm)
	}
	return nil
}

// WriteFile writes a secret readable by its owner only.
func (s Secret) WriteFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	// An existing file keeps its mode through the open; a secret may not.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(s.String() + "\n")
	}
	return errors.Join(err, f.Close())
}

func (s Secret) derive(label string, n int) []byte {
	k, err := hkdf.Key(sha256.New, s, nil, "roam "+label, n)
	if err != nil {
		panic(err) // only for n out of range, which is fixed here
	}
	return k
}

// CheckpointKey seals checkpoint files (migrate.CheckpointPlan): only a
// file an agent of a cluster with this secret wrote is restored.
func (s Secret) CheckpointKey() []byte { return s.derive("checkpoint", 32) }

// GossipKey is memberlist's AES-256 key.
func (s Secret) GossipKey() []byte { return s.derive("gossip", 32) }

// nodePrefix starts the subject of a node's certificate, before its id.
const nodePrefix = "roam node "

// CertNode is the node a certificate of the cluster's CA was made for
// (TLSConfig), or "" for one of no node. It says who sent a request only
// as far as the CA's key is kept: every member holds the secret, and with
// it could make a certificate of any name.
func CertNode(c *x509.Certificate) string {
	node, _ := strings.CutPrefix(c.Subject.CommonName, nodePrefix)
	if node == c.Subject.CommonName {
		return ""
	}
	return node
}

// caName is the subject of every cluster CA; the key tells clusters apart.
const caName = "roam cluster CA"

// CA returns the cluster CA's certificate and private key.
func (s Secret) CA() (*x509.Certificate, ed25519.PrivateKey, error) {
	key := ed25519.NewKeyFromSeed(s.derive("ca", ed25519.SeedSize))
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: caName},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// TLSConfig returns a mutual-TLS configuration for agent node: its own
// certificate (fresh key, signed by the cluster CA) and the CA as the only
// root for both client and server verification. Use it for both listening
// and dialing.
func (s Secret) TLSConfig(node string) (*tls.Config, error) {
	ca, caKey, err := s.CA()
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	leaf := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: nodePrefix + node},
		DNSNames:     []string{"roam-node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, pub, caKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		// Peers are dialed by address; every member's certificate carries
		// this one name, and only the cluster CA can have signed it.
		ServerName: "roam-node",
		MinVersion: tls.VersionTLS13,
	}, nil
}
