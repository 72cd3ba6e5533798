package pki

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSelfSignedIsKeptAcrossStarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	now := time.Now()
	first, err := SelfSigned(dir, "node-1", []net.IP{net.ParseIP("127.0.0.1")}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !first.SelfSigned || first.Replaced != "" || first.CertFile != filepath.Join(dir, CertFileName) {
		t.Errorf("first = %+v", first)
	}
	if err := first.Leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("the certificate does not cover 127.0.0.1: %v", err)
	}
	key, err := os.Stat(filepath.Join(dir, KeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	if key.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", key.Mode().Perm())
	}
	again, err := SelfSigned(dir, "node-1", nil, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again.Fingerprint() != first.Fingerprint() {
		t.Errorf("a restart made a new certificate: %s, then %s", first.Fingerprint(), again.Fingerprint())
	}
}

func TestSelfSignedReplacesWhatItCannotUse(t *testing.T) {
	tests := []struct {
		name    string
		spoil   func(t *testing.T, dir string)
		host    string
		later   time.Duration
		wantWhy string
	}{
		{
			name:    "corrupt",
			spoil:   func(t *testing.T, dir string) { write(t, filepath.Join(dir, CertFileName), "garbage") },
			host:    "node-1",
			wantWhy: "failed to find any PEM data",
		},
		{name: "expiring", host: "node-1", later: 360 * 24 * time.Hour, wantWhy: "expires"},
		{name: "another host", host: "node-2", wantWhy: "node-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			now := time.Now()
			old, err := SelfSigned(dir, "node-1", nil, now)
			if err != nil {
				t.Fatal(err)
			}
			if tt.spoil != nil {
				tt.spoil(t, dir)
			}
			s, err := SelfSigned(dir, tt.host, nil, now.Add(tt.later))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(s.Replaced, tt.wantWhy) {
				t.Errorf("Replaced = %q, want it to say %q", s.Replaced, tt.wantWhy)
			}
			if s.Fingerprint() == old.Fingerprint() {
				t.Error("the unusable certificate is still served")
			}
			aside, _ := filepath.Glob(filepath.Join(dir, CertFileName+".replaced-*"))
			if len(aside) != 1 {
				t.Errorf("moved aside: %v, want the old certificate", aside)
			}
		})
	}
}

func TestLoadNamesTheFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	write(t, cert, "nope")
	write(t, key, "nope")
	_, err := Load(cert, key)
	if err == nil || !strings.Contains(err.Error(), cert) || !strings.Contains(err.Error(), key) {
		t.Errorf("error = %v, want one naming both files", err)
	}
}

func TestFingerprint(t *testing.T) {
	// SHA-256 of the empty input, in openssl's format.
	want := "E3:B0:C4:42:98:FC:1C:14:9A:FB:F4:C8:99:6F:B9:24:27:AE:41:E4:64:9B:93:4C:A4:95:99:1B:78:52:B8:55"
	if got := Fingerprint(nil); got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
