package secret

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAndFile(t *testing.T) {
	s := New()
	p := filepath.Join(t.TempDir(), "secret")
	if err := s.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(p)
	if err != nil || !bytes.Equal(got, s) {
		t.Fatalf("ReadFile = %x, %v", got, err)
	}
	if _, err := Parse("c2hvcnQ="); !errors.Is(err, ErrBad) {
		t.Fatalf("short secret accepted: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("missing file accepted")
	}
}

// A secret file others could read or change, or that another user owns, is
// refused with a reason that says what to do; rewriting one makes it
// private again.
func TestExposedSecretRefused(t *testing.T) {
	s := New()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(s.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o644)
	if _, err := ReadFile(p); !errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("mode 0644 accepted: %v", err)
	}
	os.Chmod(p, 0o640)
	if _, err := ReadFile(p); !errors.Is(err, ErrExposed) {
		t.Fatalf("mode 0640 accepted: %v", err)
	}
	if err := s.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(p); err != nil || !bytes.Equal(got, s) {
		t.Fatalf("rewritten secret: %v", err)
	}
	fi, _ := os.Stat(p)
	if err := checkPrivate(fi, os.Geteuid()+1); !errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), "owned by") {
		t.Fatalf("a file of another user accepted: %v", err)
	}
	if _, err := ReadFile(filepath.Dir(p)); err == nil {
		t.Fatal("a directory accepted as the secret")
	}
}

func TestDerivedKeysDifferPerSecret(t *testing.T) {
	a, b := New(), New()
	if bytes.Equal(a.GossipKey(), b.GossipKey()) {
		t.Fatal("two secrets gave one gossip key")
	}
	if !bytes.Equal(a.GossipKey(), Secret(bytes.Clone(a)).GossipKey()) {
		t.Fatal("gossip key not deterministic")
	}
	ca1, _, _ := a.CA()
	ca2, _, _ := a.CA()
	if !bytes.Equal(ca1.Raw, ca2.Raw) {
		t.Fatal("CA not deterministic")
	}
}

// handshake runs one TLS exchange over a loopback connection and returns the
// server's and the client's errors.
func handshake(t *testing.T, server, client *tls.Config) (error, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		err = tc.Handshake()
		if err == nil {
			_, err = io.ReadFull(tc, make([]byte, 2))
		}
		srvErr <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		_, err = c.Write([]byte("ok"))
		if err == nil {
			// TLS 1.3 reports a rejected client certificate on the next read.
			_, err = c.Read(make([]byte, 1))
			if err == io.EOF {
				err = nil
			}
		}
		c.Close()
	}
	return <-srvErr, err
}

func TestTLSOnlyMembers(t *testing.T) {
	s := New()
	srv, _ := s.TLSConfig("1")
	member, _ := s.TLSConfig("2")
	if se, ce := handshake(t, srv, member); se != nil || ce != nil {
		t.Fatalf("member rejected: server %v, client %v", se, ce)
	}
	stranger, _ := New().TLSConfig("9")
	if se, _ := handshake(t, srv, stranger); se == nil {
		t.Fatal("a node with another secret was accepted")
	}
}
