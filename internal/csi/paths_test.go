package csi

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

func TestPaths(t *testing.T) {
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte("vol-1")))
	for _, tc := range []struct{ got, want string }{
		{StagingPath("/r", "hostpath.csi.k8s.io", "vol-1"), "/r/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/" + sum + "/globalmount"},
		{StagingDir("/r", "hostpath.csi.k8s.io", "vol-1"), "/r/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/" + sum},
		{PublishPath("/r", "uid-1", "pvc-123"), "/r/pods/uid-1/volumes/kubernetes.io~csi/pvc-123/mount"},
		{PublishDir("/r", "uid-1", "a/b"), "/r/pods/uid-1/volumes/kubernetes.io~csi/a~b"},
		{EphemeralVolumeHandle("uid-1", "scratch"), fmt.Sprintf("csi-%x", sha256.Sum256([]byte("uid-1scratch")))},
		{attachmentName("vol-1", "d", "node"), fmt.Sprintf("csi-%x", sha256.Sum256([]byte("vol-1dnode")))},
		{unescapeQualifiedName(escapeQualifiedName("example.com/x")), "example.com/x"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	// The kubelet's value for a known handle, so that berth and the
	// kubelet agree on the paths of a node that changes hands.
	if got := StagingDir("/var/lib/kubelet", "d", "vol-1"); !strings.HasSuffix(got, "/d/"+sum) || len(sum) != 64 {
		t.Errorf("StagingDir = %s", got)
	}
}
