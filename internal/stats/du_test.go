package stats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWalkDirCountsWhatDuCounts(t *testing.T) {
	dir := t.TempDir()
	writeSized(t, filepath.Join(dir, "a"), 10000)
	writeSized(t, filepath.Join(dir, "sub", "b"), 5000)
	writeSized(t, filepath.Join(dir, "sub", "deeper", "c"), 1)
	writeFile(t, filepath.Join(dir, "empty"), "")
	want := onDisk(t, dir, filepath.Join(dir, "a"), filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "b"),
		filepath.Join(dir, "sub", "deeper"), filepath.Join(dir, "sub", "deeper", "c"), filepath.Join(dir, "empty"))

	got, err := walkDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("walkDir = %+v, want %+v", got, want)
	}
	if got.Bytes < 15001 {
		t.Errorf("walkDir bytes %d, less than the files hold", got.Bytes)
	}
}

func TestWalkDirCountsHardLinksOnce(t *testing.T) {
	dir := t.TempDir()
	writeSized(t, filepath.Join(dir, "a"), 64<<10)
	mkdir(t, filepath.Join(dir, "sub"))
	before, err := walkDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"b", "sub/c"} {
		if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	after, err := walkDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("with two more links to a: %+v, want %+v as before", after, before)
	}
}

func TestWalkDirDoesNotFollowSymlinks(t *testing.T) {
	outside := t.TempDir()
	writeSized(t, filepath.Join(outside, "big"), 1<<20)
	dir := t.TempDir()
	for name, target := range map[string]string{"todir": outside, "tofile": filepath.Join(outside, "big"), "dangling": "/nonexistent"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	want := onDisk(t, dir, filepath.Join(dir, "todir"), filepath.Join(dir, "tofile"), filepath.Join(dir, "dangling"))
	got, err := walkDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("walkDir = %+v, want %+v (the links themselves only)", got, want)
	}

	// The top directory itself must not be a symlink either.
	link := filepath.Join(dir, "todir")
	if _, err := walkDir(context.Background(), link); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("walkDir(symlink) error = %v, want a refusal naming %s", err, link)
	}
}

func TestWalkDirStaysOnItsFilesystem(t *testing.T) {
	dir := t.TempDir()
	writeSized(t, filepath.Join(dir, "a"), 8192)
	mnt := filepath.Join(dir, "mnt")
	mountTmpfs(t, mnt)
	writeSized(t, filepath.Join(mnt, "other"), 1<<20)

	got, err := walkDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := onDisk(t, dir, filepath.Join(dir, "a"))
	if got != want {
		t.Errorf("walkDir = %+v, want %+v (nothing from the mount on mnt)", got, want)
	}

	// Walking the mount itself measures it.
	got, err = walkDir(context.Background(), mnt)
	if err != nil {
		t.Fatal(err)
	}
	if want := onDisk(t, mnt, filepath.Join(mnt, "other")); got != want {
		t.Errorf("walkDir(mount) = %+v, want %+v", got, want)
	}
}

func TestWalkDirDepthIsBounded(t *testing.T) {
	dir := t.TempDir()
	deep := dir
	for range maxWalkDepth + 2 {
		deep = filepath.Join(deep, "d")
	}
	mkdir(t, deep)
	got, err := walkDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// The top and maxWalkDepth levels below it are walked; the level past
	// the bound is counted as a directory entry but not read.
	if got.Inodes != maxWalkDepth+2 || got.Skipped != 1 {
		t.Errorf("walkDir = %+v, want %d inodes and 1 skipped", got, maxWalkDepth+2)
	}
}

func TestWalkDirStopsWithItsContext(t *testing.T) {
	dir := t.TempDir()
	for i := range ctxCheckEvery * 2 {
		writeFile(t, filepath.Join(dir, fmt.Sprint(i)), "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := walkDir(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("walkDir with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestWalkDirMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	_, err := walkDir(context.Background(), missing)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("walkDir(missing) error = %v, want not-exist naming the path", err)
	}
}

func TestFilesUsageCountsOnlyTopLevelFiles(t *testing.T) {
	dir := t.TempDir()
	writeSized(t, filepath.Join(dir, "pod.log"), 3000)
	writeSized(t, filepath.Join(dir, "app", "0.log"), 9000)
	got, err := filesUsage(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := onDisk(t, filepath.Join(dir, "pod.log")); got != want {
		t.Errorf("filesUsage = %+v, want %+v", got, want)
	}
}

func TestFileUsage(t *testing.T) {
	f := filepath.Join(t.TempDir(), "etc-hosts")
	writeSized(t, f, 200)
	got, err := fileUsage(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := onDisk(t, f); got != want {
		t.Errorf("fileUsage = %+v, want %+v", got, want)
	}
}

// BenchmarkWalkDir walks 10,000 files in 100 directories: an emptyDir of a
// busy pod, measured on every stats period.
func BenchmarkWalkDir(b *testing.B) {
	dir := b.TempDir()
	for d := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", d))
		mkdir(b, sub)
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d", f)), []byte("0123456789"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		u, err := walkDir(context.Background(), dir)
		if err != nil {
			b.Fatal(err)
		}
		if u.Inodes != 10101 {
			b.Fatalf("walked %d inodes, want 10101", u.Inodes)
		}
	}
}
