package buildcache

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestModuleHashFollowsGoModAndGoSum(t *testing.T) {
	dir := t.TempDir()
	write := func(f, data string) {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("go.sum", "")
	first, err := ModuleHash(dir)
	if err != nil || len(first) != 12 {
		t.Fatalf("ModuleHash = %q, %v", first, err)
	}
	if again, _ := ModuleHash(dir); again != first {
		t.Errorf("the same module hashed %q then %q", first, again)
	}
	write("go.sum", "example.com/y v1.0.0 h1:abc=\n")
	if changed, _ := ModuleHash(dir); changed == first {
		t.Error("a changed go.sum kept the hash")
	}
	os.Remove(filepath.Join(dir, "go.sum"))
	if _, err := ModuleHash(dir); err == nil {
		t.Error("a module without go.sum hashed")
	}
}

func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(context.Background(), dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	var log strings.Builder
	if _, err := Lock(ctx, dir, &log); err == nil || !strings.Contains(log.String(), "waiting for another build") {
		t.Fatalf("a second Lock while held = %v (log %q), want it to wait until ctx ends", err, log.String())
	}
	unlock()
	again, err := Lock(context.Background(), dir, io.Discard)
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	again()
}
