package csi

import (
	"testing"

	"github.com/moby/sys/mountinfo"
)

func TestSharedIn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mounts []*mountinfo.Info
		want   bool
	}{
		{"none", nil, false},
		{"shared root", []*mountinfo.Info{{Mountpoint: "/", Optional: "shared:1"}}, true},
		{"private root", []*mountinfo.Info{{Mountpoint: "/"}}, false},
		{"private bind in a shared root", []*mountinfo.Info{{Mountpoint: "/", Optional: "shared:1"}, {Mountpoint: "/var/lib/berth", Optional: "master:3"}}, false},
		{"shared bind in a private root", []*mountinfo.Info{{Mountpoint: "/var/lib/berth", Optional: "master:2 shared:7"}, {Mountpoint: "/"}}, true},
	} {
		if got := sharedIn(tc.mounts); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := RootShared(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
