package agent

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSelfCgroupV2(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, want string }{
		{"0::/system.slice/berth.service\n", "/system.slice/berth.service"},
		{"12:memory:/user.slice\n1:name=systemd:/user.slice\n0::/user.slice/x\n", "/user.slice/x"},
		{"4:memory:/\n", ""},
	} {
		f := filepath.Join(dir, "cgroup")
		if err := os.WriteFile(f, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := selfCgroupV2(f)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%q: got %q, want an error", tc.content, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.content, got, err, tc.want)
		}
	}
}
