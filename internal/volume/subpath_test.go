package volume

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrepareSubPath(t *testing.T) {
	m, _ := newTestManager(t)
	outside := t.TempDir()
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o775|os.ModeSetgid); err != nil { // as fsGroup leaves a volume
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "config.yaml"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(vol, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"inside":     filepath.Join(vol, "real"),
		"relative":   "real",
		"escape":     outside,
		"escape-rel": "../../",
		"etc":        "/etc",
	} {
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}

	if err := m.PrepareSubPath(vol, "logs/web-0/app"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"logs", "logs/web-0", "logs/web-0/app"} {
		fi, err := os.Lstat(filepath.Join(vol, d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o775 || fi.Mode()&os.ModeSetgid == 0 {
			t.Errorf("%s: %v, %v; want a setgid directory with the volume's 0775", d, fi.Mode(), err)
		}
	}
	for _, ok := range []string{".", "config.yaml", "real", "inside", "relative/sub", "inside/new/deeper", "logs/"} {
		if err := m.PrepareSubPath(vol, ok); err != nil {
			t.Errorf("PrepareSubPath(%q): %v", ok, err)
		}
	}
	if _, err := os.Stat(filepath.Join(vol, "real", "new", "deeper")); err != nil {
		t.Errorf("directory behind an inside symlink not created: %v", err)
	}
	for _, bad := range []struct{ sub, wantErr string }{
		{"escape", "outside the volume"},
		{"escape/new", "outside the volume"},
		{"escape-rel", "outside the volume"},
		{"etc/passwd", "outside the volume"},
		{"../x", "must not contain '..'"},
		{"a/../../x", "must not contain '..'"},
		{"/abs", "must not be an absolute path"},
		{"config.yaml/below", "not a directory"},
	} {
		err := m.PrepareSubPath(vol, bad.sub)
		if err == nil || !strings.Contains(err.Error(), bad.wantErr) {
			t.Errorf("PrepareSubPath(%q) = %v, want an error containing %q", bad.sub, err, bad.wantErr)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("PrepareSubPath created %d entries outside the volume", len(entries))
	}
}

func TestWriteHostsFile(t *testing.T) {
	m, _ := newTestManager(t)
	first := []byte("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.0.0.5\tweb\n")
	p, err := m.WriteHostsFile("uid-h", first)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(m.PodDir("uid-h"), "etc-hosts") {
		t.Errorf("path = %q", p)
	}
	check := func(want []byte) os.FileInfo {
		t.Helper()
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("content = %q, %v; want %q", got, err, want)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("mode = %v, want 0644", fi.Mode())
		}
		return fi
	}
	before := check(first)
	// Unchanged content leaves the file (and its inode) alone.
	if _, err := m.WriteHostsFile("uid-h", first); err != nil {
		t.Fatal(err)
	}
	if after := check(first); !os.SameFile(before, after) {
		t.Error("unchanged hosts file was rewritten")
	}
	second := append(append([]byte{}, first...), "10.1.2.3\talias\n"...)
	if _, err := m.WriteHostsFile("uid-h", second); err != nil {
		t.Fatal(err)
	}
	check(second)
	entries, _ := os.ReadDir(m.PodDir("uid-h"))
	if len(entries) != 1 {
		t.Errorf("pod directory holds %d entries, want only etc-hosts (no temporary files)", len(entries))
	}
	if _, err := m.WriteHostsFile("a/b", first); err == nil {
		t.Error("WriteHostsFile accepted a UID with a slash")
	}
}

// A subPath directory gets the volume root's mode with its special bits, as
// the kubelet's SafeMakeDir does: on a tmpfs emptyDir with fsGroup that is
// setgid and sticky (the upstream spec "nonexistent volume subPath should
// have the correct mode and owner using FSGroup" expects dgtrwxrwxrwx).
func TestPrepareSubPathKeepsSpecialBits(t *testing.T) {
	m, _ := newTestManager(t)
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o777|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := m.PrepareSubPath(vol, "sub/dir"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"sub", "sub/dir"} {
		fi, err := os.Lstat(filepath.Join(vol, d))
		if err != nil || fi.Mode() != os.ModeDir|0o777|os.ModeSetgid|os.ModeSticky {
			t.Errorf("%s: %v, %v; want dgtrwxrwxrwx", d, fi.Mode(), err)
		}
	}
}
