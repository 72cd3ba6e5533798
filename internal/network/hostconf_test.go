package network

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostConfProblem(t *testing.T) {
	bin := t.TempDir()
	for _, p := range []string{"bridge", "portmap"} {
		if err := os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	good := `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"bridge"},{"type":"portmap"}]}`
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // part of the problem; "" for none
	}{
		{"no dir", nil, "no CNI configuration file in"},
		{"empty", map[string]string{"README": "x"}, "no CNI configuration file in"},
		{"good conflist", map[string]string{"10-net.conflist": good}, ""},
		{"good conf", map[string]string{"10-net.conf": `{"name":"n","type":"bridge"}`}, ""},
		{"not JSON", map[string]string{"10-net.conflist": "{"}, "10-net.conflist: not valid JSON"},
		{"no name", map[string]string{"10-net.conflist": `{"plugins":[{"type":"bridge"}]}`}, `10-net.conflist: field "name": missing or empty`},
		{"no plugins", map[string]string{"10-net.conflist": `{"name":"n"}`}, `field "plugins": missing or empty`},
		{"plugin without type", map[string]string{"10-net.conflist": `{"name":"n","plugins":[{"type":"bridge"},{}]}`}, `field "plugins[1].type": missing or empty`},
		{"conf without type", map[string]string{"10-net.conf": `{"name":"n"}`}, `10-net.conf: field "type": missing or empty`},
		{"plugin missing", map[string]string{"10-net.conflist": `{"name":"n","plugins":[{"type":"flannel"}]}`}, `plugin "flannel" not found in ` + bin},
		{"first by name counts", map[string]string{"05-bad.conf": "{", "10-net.conflist": good}, "05-bad.conf: not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "net.d")
			if tc.files != nil {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, data := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := HostConfProblem(dir, bin)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
