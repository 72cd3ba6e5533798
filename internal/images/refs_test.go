package images

import (
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRefKeys(t *testing.T) {
	hex := strings.Repeat("a", 64)
	tests := []struct {
		ref  string
		want []string
	}{
		{"", nil},
		{"  ", nil},
		{"busybox", []string{"docker.io/library/busybox:latest"}},
		{"busybox:1.35", []string{"docker.io/library/busybox:1.35"}},
		{"library/busybox", []string{"docker.io/library/busybox:latest"}},
		{"docker.io/library/busybox:latest", []string{"docker.io/library/busybox:latest"}},
		{"berth.local/busybox:1.35", []string{"berth.local/busybox:1.35"}},
		{"127.0.0.1:5000/app", []string{"127.0.0.1:5000/app:latest"}},
		{"sha256:" + hex, []string{"sha256:" + hex}},
		{hex, []string{"sha256:" + hex}},
		{"busybox@sha256:" + hex, []string{"docker.io/library/busybox@sha256:" + hex}},
		{"busybox:1.35@sha256:" + hex, []string{"docker.io/library/busybox@sha256:" + hex, "docker.io/library/busybox:1.35"}},
		{"Not A Reference!", []string{"Not A Reference!"}},
	}
	for _, tt := range tests {
		if got := refKeys(tt.ref); !slices.Equal(got, tt.want) {
			t.Errorf("refKeys(%q) = %q, want %q", tt.ref, got, tt.want)
		}
	}
}

// An image is found by its ID, by any of its tags, by a short name that
// normalizes to one of them, and by its digest; never by another image's.
func TestRefSetMatchesImages(t *testing.T) {
	hex := strings.Repeat("d", 64)
	busybox := &runtimeapi.Image{
		Id:          id('a'),
		RepoTags:    []string{"docker.io/library/busybox:latest", "berth.local/busybox:1.35"},
		RepoDigests: []string{"docker.io/library/busybox@sha256:" + hex},
	}
	untagged := &runtimeapi.Image{Id: id('b'), RepoDigests: []string{"berth.local/app@sha256:" + hex}}
	tests := []struct {
		name string
		refs []string
		img  *runtimeapi.Image
		want bool
	}{
		{"by ID", []string{id('a')}, busybox, true},
		{"by bare hex ID", []string{strings.Repeat("a", 64)}, busybox, true},
		{"by full tag", []string{"docker.io/library/busybox:latest"}, busybox, true},
		{"by short name", []string{"busybox"}, busybox, true},
		{"by short name and tag", []string{"busybox:latest"}, busybox, true},
		{"by another registry's tag", []string{"berth.local/busybox:1.35"}, busybox, true},
		{"by digest", []string{"busybox@sha256:" + hex}, busybox, true},
		{"by tag and digest", []string{"busybox:9.9@sha256:" + hex}, busybox, true},
		{"untagged image by digest", []string{"berth.local/app@sha256:" + hex}, untagged, true},
		{"other tag", []string{"busybox:1.36"}, busybox, false},
		{"same tag, other registry", []string{"berth.local/busybox:latest"}, busybox, false},
		{"other ID", []string{id('b')}, busybox, false},
		{"digest under another name", []string{"alpine@sha256:" + hex}, busybox, false},
		{"nothing", nil, busybox, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newRefSet(tt.refs...).has(imageKeys(tt.img)); got != tt.want {
				t.Errorf("refs %q match %s: %v, want %v", tt.refs, tt.img.Id, got, tt.want)
			}
		})
	}
}

func TestPinReason(t *testing.T) {
	p := pins{sandbox: newRefSet("berth.local/pause:3.10"), configured: newRefSet("keep")}
	tests := []struct {
		name string
		img  *runtimeapi.Image
		want pinReason
	}{
		{"sandbox", &runtimeapi.Image{Id: id('a'), RepoTags: []string{"berth.local/pause:3.10"}}, pinnedSandbox},
		{"sandbox, also pinned by the runtime", &runtimeapi.Image{Id: id('a'), RepoTags: []string{"berth.local/pause:3.10"}, Pinned: true}, pinnedSandbox},
		{"configured short name", &runtimeapi.Image{Id: id('b'), RepoTags: []string{"docker.io/library/keep:latest"}}, pinnedConfigured},
		{"runtime flag", &runtimeapi.Image{Id: id('c'), Pinned: true}, pinnedByRuntime},
		{"not pinned", &runtimeapi.Image{Id: id('d'), RepoTags: []string{"docker.io/library/keep:2"}}, ""},
	}
	for _, tt := range tests {
		if got := p.reason(tt.img, imageKeys(tt.img)); got != tt.want {
			t.Errorf("%s: reason = %q, want %q", tt.name, got, tt.want)
		}
	}
}
