package containerd

import "testing"

func TestFullReference(t *testing.T) {
	for in, want := range map[string]string{
		"berth.local/pause:1.0":  "berth.local/pause:1.0",
		"busybox:1.35":           "docker.io/library/busybox:1.35",
		"library/busybox":        "docker.io/library/busybox:latest",
		"127.0.0.1:5000/app:v2":  "127.0.0.1:5000/app:v2",
		"latest":                 "", // a bare tag names no repository
		"1.0":                    "",
		"Not/A Valid:Reference!": "",
	} {
		if got := fullReference(in); got != want {
			t.Errorf("fullReference(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsImageArchive(t *testing.T) {
	for file, want := range map[string]bool{
		"busybox.tar": true, "pause.tar.gz": true, "x.tgz": true,
		"README": false, "busybox.tar.partial": false, "image.zip": false,
	} {
		if got := isImageArchive(file); got != want {
			t.Errorf("isImageArchive(%q) = %v, want %v", file, got, want)
		}
	}
}
