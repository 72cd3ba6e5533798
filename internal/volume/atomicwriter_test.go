package volume

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func files(kv ...string) map[string]FileProjection {
	p := map[string]FileProjection{}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = FileProjection{Data: []byte(kv[i+1]), Mode: 0o644}
	}
	return p
}

func readVisible(t *testing.T, dir, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func dataTarget(t *testing.T, dir string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// dataDirs lists the timestamped directories in dir.
func dataDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "..") {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWriteAtomicLayout(t *testing.T) {
	dir := t.TempDir()
	payload := files("app.conf", "a=1")
	payload["keys/tls.key"] = FileProjection{Data: []byte("KEY"), Mode: 0o400}
	if err := writeAtomic(dir, payload, nil); err != nil {
		t.Fatal(err)
	}
	ts := dataTarget(t, dir)
	if !strings.HasPrefix(ts, "..20") || strings.Contains(ts, "/") {
		t.Errorf("..data -> %q, want a timestamped sibling", ts)
	}
	for name, want := range map[string]string{"app.conf": "..data/app.conf", "keys": "..data/keys"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != want {
			t.Errorf("%s -> %q, %v; want %q", name, got, err, want)
		}
	}
	if got := readVisible(t, dir, "keys/tls.key"); got != "KEY" {
		t.Errorf("keys/tls.key = %q", got)
	}
	for p, want := range map[string]fs.FileMode{
		ts: 0o755, ts + "/keys": 0o755, ts + "/app.conf": 0o644, ts + "/keys/tls.key": 0o400,
	} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
}

func TestWriteAtomicUpdate(t *testing.T) {
	dir := t.TempDir()
	if err := writeAtomic(dir, files("a", "old", "b", "gone soon", "sub/c", "nested"), nil); err != nil {
		t.Fatal(err)
	}
	oldTs := dataTarget(t, dir)
	checked := false
	// setPerms runs once the new files are written and before the swap:
	// readers still see the old content then.
	err := writeAtomic(dir, files("a", "new", "sub/d", "added"), func() error {
		checked = true
		if got := readVisible(t, dir, "a"); got != "old" {
			t.Errorf("before the swap a = %q, want old", got)
		}
		if got := readVisible(t, dir, "b"); got != "gone soon" {
			t.Errorf("before the swap b = %q", got)
		}
		if n := len(dataDirs(t, dir)); n != 2 {
			t.Errorf("before the swap %d data directories, want old and new", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("setPerms was not called for a change")
	}
	if ts := dataTarget(t, dir); ts == oldTs {
		t.Fatal("..data was not swapped")
	}
	if got := readVisible(t, dir, "a"); got != "new" {
		t.Errorf("a = %q, want new", got)
	}
	if got := readVisible(t, dir, "sub/d"); got != "added" {
		t.Errorf("sub/d = %q", got)
	}
	for _, p := range []string{"b", "sub/c", oldTs} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	if dirs := dataDirs(t, dir); len(dirs) != 1 {
		t.Errorf("data directories left: %v", dirs)
	}
}

func TestWriteAtomicUnchangedWritesNothing(t *testing.T) {
	dir := t.TempDir()
	payload := files("a", "1", "x/y", "2")
	if err := writeAtomic(dir, payload, nil); err != nil {
		t.Fatal(err)
	}
	ts := dataTarget(t, dir)
	err := writeAtomic(dir, payload, func() error {
		t.Error("setPerms called for unchanged content")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := dataTarget(t, dir); got != ts {
		t.Errorf("..data moved from %s to %s for unchanged content", ts, got)
	}
	// A visible link lost somehow is put back even then.
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(dir, payload, nil); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, dir, "a"); got != "1" {
		t.Errorf("a = %q", got)
	}
}

func TestWriteAtomicShapeChanges(t *testing.T) {
	dir := t.TempDir()
	if err := writeAtomic(dir, files("x", "file"), nil); err != nil {
		t.Fatal(err)
	}
	// A key that was a file is now a directory, and back.
	if err := writeAtomic(dir, files("x/y", "nested"), nil); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, dir, "x/y"); got != "nested" {
		t.Errorf("x/y = %q", got)
	}
	if err := writeAtomic(dir, files("x", "file again"), nil); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, dir, "x"); got != "file again" {
		t.Errorf("x = %q", got)
	}
	// Everything removed: an empty volume, still with its ..data.
	if err := writeAtomic(dir, nil, nil); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 || dataTarget(t, dir) == "" {
		t.Errorf("empty payload left %v", entries)
	}
}

func TestWriteAtomicCleansCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	if err := writeAtomic(dir, files("a", "1"), nil); err != nil {
		t.Fatal(err)
	}
	// A berth killed mid-write left a data directory and the temporary link.
	stale := filepath.Join(dir, "..2020_01_01_00_00_00.123")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(stale), filepath.Join(dir, newDataDirName)); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(dir, files("a", "2"), nil); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, dir, "a"); got != "2" {
		t.Errorf("a = %q", got)
	}
	for _, p := range []string{stale, filepath.Join(dir, newDataDirName)} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left: %v", filepath.Base(p), err)
		}
	}
}

func TestValidatePayloadPath(t *testing.T) {
	for _, tt := range []struct {
		path, wantErr string
	}{
		{"ca.crt", ""},
		{"a/b/c", ""},
		{"..hidden/x", "must not start with '..'"},
		{"..data", "must not start with '..'"},
		{"a/..b", ""},
		{"", "must not be empty"},
		{"/etc/passwd", "must be relative"},
		{"a/../../etc", "must not contain '..'"},
		{strings.Repeat("x", 256), "at most 255"},
		{strings.Repeat("x/", 2049), "less than or equal to 4096"},
	} {
		err := validatePayloadPath(tt.path)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("validatePayloadPath(%.20q) = %v, want %q", tt.path, err, tt.wantErr)
		}
	}
	if err := writeAtomic(t.TempDir(), files("../escape", "x"), nil); err == nil {
		t.Error("writeAtomic accepted a path leaving the volume")
	}
}
