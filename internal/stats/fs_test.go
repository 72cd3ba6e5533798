package stats

import (
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestFsInfoOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   unix.Statfs_t
		want fsInfo
	}{
		{
			"fragment size is the unit",
			unix.Statfs_t{Bsize: 4096, Frsize: 1024, Blocks: 1000, Bfree: 400, Bavail: 300, Files: 50, Ffree: 20},
			fsInfo{Capacity: 1024000, Available: 307200, Used: 614400, Inodes: 50, InodesFree: 20},
		},
		{
			"block size when there is no fragment size",
			unix.Statfs_t{Bsize: 4096, Blocks: 10, Bfree: 10, Bavail: 5},
			fsInfo{Capacity: 40960, Available: 20480, Used: 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fsInfoOf(&tc.st); got != tc.want {
				t.Errorf("fsInfoOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFsInfoStats(t *testing.T) {
	now := metav1.NewTime(time.Unix(5, 0))
	f := fsInfo{Capacity: 1000, Available: 300, Used: 600, Inodes: 50, InodesFree: 20}
	want := &statsapi.FsStats{
		Time: now, CapacityBytes: ptr(uint64(1000)), AvailableBytes: ptr(uint64(300)), UsedBytes: ptr(uint64(600)),
		Inodes: ptr(uint64(50)), InodesFree: ptr(uint64(20)), InodesUsed: ptr(uint64(30)),
	}
	if got := f.toStats(now); !reflect.DeepEqual(got, want) {
		t.Errorf("toStats = %+v, want %+v", got, want)
	}
	u := diskUsage{Bytes: 8192, Inodes: 2}
	if got := usageOn(nil, u, now); got.CapacityBytes != nil || *got.UsedBytes != 8192 || *got.InodesUsed != 2 {
		t.Errorf("usageOn(unknown fs) = %+v", got)
	}
	if got := usageOn(&f, u, now); *got.CapacityBytes != 1000 || *got.UsedBytes != 8192 || *got.InodesFree != 20 {
		t.Errorf("usageOn(fs) = %+v", got)
	}
}
