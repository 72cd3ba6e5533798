// Package pki gives the secure API its serving certificate: the one the
// configuration names, or a self-signed one berth makes once and keeps, as
// the kubelet does in its --cert-dir, so its fingerprint stays the same
// across restarts and clients can pin it.
package pki

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// The self-signed certificate's files in its directory.
const (
	CertFileName = "berth.crt"
	KeyFileName  = "berth.key"
)

// renewBefore is how long before it expires a self-signed certificate is
// replaced: a restart inside that window makes a new one rather than serve
// one that dies a few hours later.
const renewBefore = 7 * 24 * time.Hour

// Serving is a serving certificate and where it came from.
type Serving struct {
	Certificate tls.Certificate
	// Leaf is the certificate clients see first.
	Leaf *x509.Certificate
	// SelfSigned is set when berth made the certificate; CertFile is then
	// the PEM bundle (certificate and its CA) clients can trust.
	SelfSigned bool
	CertFile   string
	// Replaced names a self-signed certificate that could not be used
	// (unreadable, expiring, not for this host) and was moved aside.
	Replaced string
}

// Fingerprint is the SHA-256 fingerprint of the leaf, as
// `openssl x509 -fingerprint -sha256` prints it.
func (s *Serving) Fingerprint() string { return Fingerprint(s.Leaf.Raw) }

// Fingerprint formats the SHA-256 of a DER certificate as colon-separated
// upper-case hex pairs.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	pairs := make([]string, 0, len(sum))
	for i := 0; i < len(h); i += 2 {
		pairs = append(pairs, h[i:i+2])
	}
	return strings.Join(pairs, ":")
}

// Load reads the configured certificate and key.
func Load(certFile, keyFile string) (*Serving, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %s, key %s: %w", certFile, keyFile, err)
	}
	return &Serving{Certificate: pair, Leaf: pair.Leaf, CertFile: certFile}, nil
}

// SelfSigned returns the self-signed certificate kept in dir, making a new
// one for host (the node name) and ips when there is none, it does not
// parse, it expires within renewBefore, or it does not name host: a file
// that cannot be used is moved aside, never trusted.
func SelfSigned(dir, host string, ips []net.IP, now time.Time) (*Serving, error) {
	certFile, keyFile := filepath.Join(dir, CertFileName), filepath.Join(dir, KeyFileName)
	s, err := loadSelfSigned(certFile, keyFile)
	if err == nil {
		err = usable(s.Leaf, host, now)
	}
	if err == nil {
		return s, nil
	}
	var replaced string
	if !errors.Is(err, fs.ErrNotExist) {
		replaced = fmt.Sprintf("%s (%v)", certFile, err)
		suffix := ".replaced-" + now.UTC().Format("20060102T150405Z")
		for _, f := range []string{certFile, keyFile} {
			if rerr := os.Rename(f, f+suffix); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return nil, fmt.Errorf("moving aside the unusable %s: %w", f, rerr)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, ips, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("making a self-signed serving certificate: %w", err)
	}
	// The key first: a certificate on disk without its key would be
	// replaced at the next start anyway, the other way round it would not.
	if err := atomicfile.Write(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(certFile, certPEM, 0o644); err != nil {
		return nil, err
	}
	s, err = loadSelfSigned(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("the self-signed certificate just made: %w", err)
	}
	s.Replaced = replaced
	return s, nil
}

func loadSelfSigned(certFile, keyFile string) (*Serving, error) {
	if _, err := os.Stat(certFile); err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &Serving{Certificate: pair, Leaf: pair.Leaf, SelfSigned: true, CertFile: certFile}, nil
}

// usable reports why a kept self-signed certificate must be replaced.
func usable(leaf *x509.Certificate, host string, now time.Time) error {
	if now.Add(renewBefore).After(leaf.NotAfter) {
		return fmt.Errorf("expires %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return leaf.VerifyHostname(host)
}
