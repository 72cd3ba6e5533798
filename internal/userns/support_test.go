package userns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReachableFromUserNamespace(t *testing.T) {
	root := t.TempDir()
	// t.TempDir makes its directory and its parent 0700; /tmp and up are
	// searchable on any sane host.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(root, "open", "containerd", "state")
	closed := filepath.Join(root, "closed")
	if err := os.MkdirAll(open, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(closed, "containerd", "state"), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir, want string }{
		{"no managed runtime", "", ""},
		{"searchable all the way", open, ""},
		{"not made yet: its parents decide", filepath.Join(root, "open", "later"), ""},
		{"a closed parent", filepath.Join(closed, "containerd", "state"), closed + " (mode 0700) is not searchable by other users"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReachableFromUserNamespace(tc.dir)
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
