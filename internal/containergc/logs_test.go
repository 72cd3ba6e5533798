package containergc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWithin(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/var/log/pods/ns_web_uid/app/0.log", true},
		{"/var/log/pods/x", true},
		{"/var/log/pods", false},
		{"/var/log/pods/..", false},
		{"/var/log/pods/../secret", false},
		{"/var/log/podsx/0.log", false},
		{"/var/log/..pods", false},
		{"/etc/passwd", false},
		{"relative/0.log", false},
	}
	for _, tt := range tests {
		if got := within("/var/log/pods", filepath.Clean(tt.path)); got != tt.want {
			t.Errorf("within(/var/log/pods, %q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// A log whose directory is gone has nothing to remove; a pod logs directory
// that is missing has no pods.
func TestMissingLogs(t *testing.T) {
	dir := t.TempDir()
	if err := removeContainerLogs(filepath.Join(dir, "gone", "0.log")); err != nil {
		t.Errorf("removeContainerLogs(missing) = %v, want nil", err)
	}
	if names, err := readPodLogDirs(filepath.Join(dir, "gone")); err != nil || names != nil {
		t.Errorf("readPodLogDirs(missing) = %q, %v; want nothing", names, err)
	}
	// Files in the pod logs directory are not pods'.
	if err := os.WriteFile(filepath.Join(dir, "ns_web_uid"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ns_api_uid2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if names, err := readPodLogDirs(dir); err != nil || len(names) != 1 || names[0] != "ns_api_uid2" {
		t.Errorf("readPodLogDirs() = %q, %v; want the one directory", names, err)
	}
}
