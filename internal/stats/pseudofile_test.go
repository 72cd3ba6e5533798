package stats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	// Larger than a read buffer: it takes several reads.
	big := bytes.Repeat([]byte("0123456789abcdef"), 3000)
	for name, content := range map[string][]byte{"empty": {}, "small": []byte("12\n"), "big": big} {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, content, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readFile(file)
		if err != nil || !bytes.Equal(got, content) || got == nil {
			t.Errorf("%s: %d bytes, %v; want its %d bytes", name, len(got), err, len(content))
		}
	}
	missing := filepath.Join(dir, "missing")
	_, err := readFile(missing)
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != missing {
		t.Errorf("missing file: %v, want a not-exist *fs.PathError naming it", err)
	}
	if _, err := readFile(dir); !errors.Is(err, unix.EISDIR) || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory: %v, want EISDIR naming it", err)
	}
}

func TestSubdirs(t *testing.T) {
	dir := t.TempDir()
	var want []string
	// Enough entries for several getdents calls.
	for i := range 600 {
		name := filepath.Join(dir, fmt.Sprintf("%s%03d", strings.Repeat("d", 1+i%40), i))
		if i%3 == 0 {
			if err := os.WriteFile(name, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.Mkdir(name, 0o755); err != nil {
			t.Fatal(err)
		}
		want = append(want, filepath.Base(name))
	}
	if err := os.Symlink(filepath.Join(dir, want[0]), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := subdirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("subdirs: %d names, want the %d directories (no files, links, . or ..)", len(got), len(want))
	}
	if _, err := subdirs(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing directory: %v, want not-exist", err)
	}
}

// appendDirs stops at a record that claims more than the buffer holds
// rather than reading past it.
func TestAppendDirsTruncated(t *testing.T) {
	rec := func(typ byte, name string, reclen int) []byte {
		b := make([]byte, reclen)
		binary.NativeEndian.PutUint16(b[16:18], uint16(reclen))
		b[18] = typ
		copy(b[19:], name)
		return b
	}
	buf := slices.Concat(rec(unix.DT_DIR, "a", 24), rec(unix.DT_REG, "f", 24), rec(unix.DT_DIR, "..", 24), rec(unix.DT_DIR, "b", 24))
	if got := appendDirs(nil, buf); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("whole records: %q, want [a b]", got)
	}
	bad := slices.Concat(rec(unix.DT_DIR, "a", 24), rec(unix.DT_DIR, "b", 24)[:20])
	if got := appendDirs(nil, bad); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a cut record: %q, want [a]", got)
	}
}
