package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of a missing checkpoint: %v, want fs.ErrNotExist", err)
	}
	for _, content := range []string{"first", "second, longer than the first"} {
		if err := Write(dir, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := Read(dir)
		if err != nil || string(got) != content {
			t.Fatalf("Read = %q, %v; want %q", got, err, content)
		}
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", st.Mode(), err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{FileName}) {
		t.Errorf("directory holds %v, want only %s (no temporary files)", names, FileName)
	}
	if err := Write(filepath.Join(dir, "missing"), []byte("x")); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}

func TestQuarantine(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600))
	want := filepath.Join(dir, FileName+".corrupt-20250102T020405.000000006Z")

	if _, err := Quarantine(dir, now); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Quarantine of a missing checkpoint: %v, want fs.ErrNotExist", err)
	}
	if err := Write(dir, []byte("corrupt")); err != nil {
		t.Fatal(err)
	}
	got, err := Quarantine(dir, now)
	if err != nil || got != want {
		t.Fatalf("Quarantine = %q, %v; want %q", got, err, want)
	}
	if b, err := os.ReadFile(want); err != nil || string(b) != "corrupt" {
		t.Errorf("quarantined file holds %q, %v; want the corrupt bytes", b, err)
	}
	if _, err := Read(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("checkpoint still readable after quarantine: %v", err)
	}

	// A second corrupt file at the same instant must not replace the first;
	// nor may a directory in the checkpoint's place stop the quarantine.
	if err := Write(dir, []byte("corrupt again")); err != nil {
		t.Fatal(err)
	}
	second, err := Quarantine(dir, now)
	if err != nil || second != want+"-1" {
		t.Fatalf("second Quarantine at the same instant = %q, %v; want %q", second, err, want+"-1")
	}
	if b, _ := os.ReadFile(want); string(b) != "corrupt" {
		t.Errorf("first quarantined file now holds %q", b)
	}
	if err := os.Mkdir(filepath.Join(dir, FileName), 0o700); err != nil {
		t.Fatal(err)
	}
	later, err := Quarantine(dir, now.Add(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(later); err != nil || !st.IsDir() {
		t.Errorf("the directory was not moved to %s: %v", later, err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{filepath.Base(want), filepath.Base(second), filepath.Base(later)}) {
		t.Errorf("directory holds %v", names)
	}
}
