package stats

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// writeFile writes data at path, creating its parents.
func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSized writes n non-zero bytes, so that no filesystem stores it
// sparsely.
func writeSized(t testing.TB, path string, n int) {
	t.Helper()
	writeFile(t, path, string(bytes.Repeat([]byte{'x'}, n)))
}

// mkdir creates dir and its parents.
func mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// onDisk is what du counts for each path: the test's oracle, independent
// of the walk.
func onDisk(t testing.TB, paths ...string) diskUsage {
	t.Helper()
	var u diskUsage
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		u.Bytes += uint64(st.Blocks) * 512
		u.Inodes++
	}
	return u
}

// mountTmpfs mounts a small tmpfs on dir (created if needed) until the
// test ends.
func mountTmpfs(t testing.TB, dir string) {
	t.Helper()
	mkdir(t, dir)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatalf("mount tmpfs on %s (the tests run as root): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}
