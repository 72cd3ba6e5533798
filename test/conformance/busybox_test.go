package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHideApplet(t *testing.T) {
	table := "\x7fELF...\x00[\x00[[\x00mv\x00nameif\x00nc\x00netstat\x00nl\x00\x00usage"
	tests := []struct {
		bin, name, alias string
		want, wantErr    string
	}{
		{bin: table, name: "nc", alias: "nd", want: strings.Replace(table, "\x00nc\x00", "\x00nd\x00", 1)},
		{bin: table, name: "nc", alias: "nz", wantErr: "does not sort between"},
		{bin: table, name: "nc", alias: "nce", wantErr: "as long"},
		{bin: table, name: "nc", alias: "nl", wantErr: "does not sort between"},
		{bin: table, name: "ip", alias: "iq", wantErr: "found 0 times"},
		{bin: table + "\x00nc\x00", name: "nc", alias: "nd", wantErr: "found 2 times"},
	}
	for _, tt := range tests {
		got, err := hideApplet([]byte(tt.bin), tt.name, tt.alias)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("hideApplet(%s, %s): err %v, want %q", tt.name, tt.alias, err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("hideApplet(%s, %s) = %q, %v; want %q", tt.name, tt.alias, got, err, tt.want)
		}
	}
}

// TestHideAppletShell checks, on the host's static busybox, that the sh of
// a busybox without the nc applet runs the nc it finds in PATH.
func TestHideAppletShell(t *testing.T) {
	data, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("the images are made of /bin/busybox (Debian's busybox-static): %v", err)
	}
	patched, err := hideApplet(data, "nc", "nd")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bb := filepath.Join(dir, "busybox")
	if err := os.WriteFile(bb, patched, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nc"), []byte("#!/bin/busybox sh\necho stand-in \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bb, "sh", "-c", "nc -u -w 1 10.0.0.1 53")
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "stand-in -u -w 1 10.0.0.1 53" {
		t.Errorf("sh ran %q (%v), want the stand-in in PATH", out, err)
	}
}
