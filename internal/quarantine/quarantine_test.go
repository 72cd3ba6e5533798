package quarantine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 27, 9, 30, 5, 123456789, time.FixedZone("CET", 3600))

func TestName(t *testing.T) {
	for _, tc := range []struct {
		try  int
		want string
	}{
		{0, "/r/state.json.corrupt-20261127T083005.123456789Z"},
		{1, "/r/state.json.corrupt-20261127T083005.123456789Z-1"},
		{12, "/r/state.json.corrupt-20261127T083005.123456789Z-12"},
	} {
		if got := Name("/r/state.json", t0, tc.try); got != tc.want {
			t.Errorf("Name(try %d) = %q, want %q", tc.try, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	at := t0.UTC()
	for _, tc := range []struct {
		name string
		orig string
		ok   bool
	}{
		{filepath.Base(Name("/r/default_web.json", t0, 0)), "default_web.json", true},
		{filepath.Base(Name("/r/default_web.json", t0, 3)), "default_web.json", true},
		{"a.corrupt-x.corrupt-20261127T083005.123456789Z", "a.corrupt-x", true},
		{"default_web.json", "", false},
		{".corrupt-20261127T083005.123456789Z", "", false},
		{"web.json.corrupt-20261127T083005Z", "", false}, // seconds only: not Name's
		{"web.json.corrupt-20261127T083005.123456789Z-0", "", false},
		{"web.json.corrupt-20261127T083005.123456789Z-01", "", false},
		{"web.json.corrupt-20261127T083005.123456789Z-x", "", false},
		{"web.json.corrupt-20261127T083005.123456789Z.forgotten", "", false},
		{"web.json.corrupt", "", false},
	} {
		orig, gotAt, ok := Parse(tc.name)
		if ok != tc.ok || orig != tc.orig || (ok && !gotAt.Equal(at)) {
			t.Errorf("Parse(%q) = %q, %v, %v; want %q, %v, %v", tc.name, orig, gotAt, ok, tc.orig, at, tc.ok)
		}
	}
}

// TestMove sets aside every kind of thing that may stand where a state
// file belongs, and checks that nothing else is touched.
func TestMove(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		// check runs on what Move returned.
		check func(t *testing.T, moved string)
	}{
		{"regular file", func(t *testing.T, p string) { write(t, p, "{half") },
			func(t *testing.T, moved string) {
				if b, err := os.ReadFile(moved); err != nil || string(b) != "{half" {
					t.Errorf("moved file holds %q, %v", b, err)
				}
			}},
		{"directory with contents", func(t *testing.T, p string) {
			if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(p, "sub", "f"), "x")
		}, func(t *testing.T, moved string) {
			if b, err := os.ReadFile(filepath.Join(moved, "sub", "f")); err != nil || string(b) != "x" {
				t.Errorf("moved directory lost its contents: %q, %v", b, err)
			}
		}},
		{"named pipe", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, moved string) { wantType(t, moved, fs.ModeNamedPipe) }},
		{"dangling symlink", func(t *testing.T, p string) {
			if err := os.Symlink("/nowhere/at/all", p); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, moved string) {
			if dst, err := os.Readlink(moved); err != nil || dst != "/nowhere/at/all" {
				t.Errorf("moved link points to %q, %v", dst, err)
			}
		}},
		{"symlink to a file", func(t *testing.T, p string) {
			target := filepath.Join(filepath.Dir(p), "target")
			write(t, target, "keep")
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, moved string) {
			wantType(t, moved, fs.ModeSymlink)
			if b, err := os.ReadFile(filepath.Join(filepath.Dir(moved), "target")); err != nil || string(b) != "keep" {
				t.Errorf("the link's target was touched: %q, %v", b, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			tc.make(t, path)
			moved, err := Move(path, t0)
			if err != nil {
				t.Fatal(err)
			}
			if want := Name(path, t0, 0); moved != want {
				t.Errorf("moved to %q, want %q", moved, want)
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s still there: %v", path, err)
			}
			tc.check(t, moved)
		})
	}
}

// Two files set aside at the same instant both stay, whatever they are:
// the second never replaces the first (a rename over an empty directory
// or a file would).
func TestMoveSameInstant(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	var moved []string
	for i, mk := range []func(){
		func() { write(t, path, "first") },
		func() { mkdir(t, path) },
		func() { write(t, path, "third") },
		func() { mkdir(t, path) },
	} {
		mk()
		to, err := Move(path, t0)
		if err != nil {
			t.Fatalf("move %d: %v", i, err)
		}
		moved = append(moved, to)
	}
	want := []string{Name(path, t0, 0), Name(path, t0, 1), Name(path, t0, 2), Name(path, t0, 3)}
	if !slices.Equal(moved, want) {
		t.Errorf("moved to %q, want %q", moved, want)
	}
	if b, err := os.ReadFile(moved[0]); err != nil || string(b) != "first" {
		t.Errorf("the first file was replaced: %q, %v", b, err)
	}
	if b, err := os.ReadFile(moved[2]); err != nil || string(b) != "third" {
		t.Errorf("the third file was replaced: %q, %v", b, err)
	}
	wantType(t, moved[1], fs.ModeDir)
	wantType(t, moved[3], fs.ModeDir)
}

// Where the file system cannot refuse to replace, the name is looked at
// first.
func TestRenameLookFirst(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, from, "a")
	write(t, to, "b")
	if err := renameLookFirst(from, to); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("renaming over a file: %v, want fs.ErrExist", err)
	}
	if err := os.Remove(to); err != nil {
		t.Fatal(err)
	}
	if err := renameLookFirst(from, to); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(to); err != nil || string(b) != "a" {
		t.Errorf("renamed file holds %q, %v", b, err)
	}
}

func TestMoveMissing(t *testing.T) {
	_, err := Move(filepath.Join(t.TempDir(), "gone"), t0)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "file"), "content")
	mkdir(t, filepath.Join(dir, "dir"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nowhere/at/all", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "file"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		want    string
		wantErr error
		msg     string
	}{
		{"file", "content", nil, ""},
		{"missing", "", fs.ErrNotExist, ""},
		{"dir", "", ErrNotRegular, "dir: is a directory, not a regular file"},
		{"fifo", "", ErrNotRegular, "fifo: is a named pipe, not a regular file"},
		{"dangling", "", ErrNotRegular, "dangling: is a symbolic link, not a regular file"},
		{"link", "", ErrNotRegular, "link: is a symbolic link, not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			got, err := ReadFile(path)
			if string(got) != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("ReadFile = %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
			if tc.msg != "" && err.Error() != filepath.Join(dir, tc.msg) {
				t.Errorf("error %q, want %q", err, filepath.Join(dir, tc.msg))
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
}

func wantType(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
	} else if st.Mode().Type() != want {
		t.Errorf("%s: type %v, want %v", path, st.Mode().Type(), want)
	}
}

func TestMkdirAll(t *testing.T) {
	for _, tc := range []struct {
		name      string
		make      func(t *testing.T, dir string)
		wantMoved bool
	}{
		{"missing", func(*testing.T, string) {}, false},
		{"directory", func(t *testing.T, d string) { mkdir(t, d); write(t, filepath.Join(d, "keep"), "x") }, false},
		{"symlink to a directory", func(t *testing.T, d string) {
			mkdir(t, d+"-real")
			write(t, filepath.Join(d+"-real", "keep"), "x")
			if err := os.Symlink(d+"-real", d); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"regular file", func(t *testing.T, d string) { write(t, d, "x") }, true},
		{"dangling symlink", func(t *testing.T, d string) {
			if err := os.Symlink("/nowhere", d); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			tc.make(t, dir)
			moved, err := MkdirAll(dir, 0o700, t0)
			if err != nil {
				t.Fatal(err)
			}
			if want := Name(dir, t0, 0); tc.wantMoved != (moved == want) {
				t.Errorf("moved = %q, want moved: %v", moved, tc.wantMoved)
			}
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				t.Fatalf("no directory at %s: %v", dir, err)
			}
			if !tc.wantMoved && tc.name != "missing" {
				if _, err := os.Stat(filepath.Join(dir, "keep")); err != nil {
					t.Errorf("the directory's contents are gone: %v", err)
				}
			}
		})
	}
}
