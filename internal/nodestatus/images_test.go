package nodestatus

import (
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestImages(t *testing.T) {
	images := []*runtimeapi.Image{
		{Id: "small", RepoTags: []string{"busybox:1"}, Size: 10},
		{Id: "big", RepoTags: []string{"app:1", "app:latest"}, RepoDigests: []string{"app@sha256:a"}, Size: 300},
		{Id: "untagged", Size: 1000},
		{Id: "many", RepoTags: []string{"a", "b", "c", "d", "e", "f"}, Size: 200},
	}
	got := Images(images, 3)
	if len(got) != 2 {
		t.Fatalf("images = %+v, want the 3 largest but the one without a name", got)
	}
	if want := []string{"app@sha256:a", "app:1", "app:latest"}; !slices.Equal(got[0].Names, want) || got[0].SizeBytes != 300 {
		t.Errorf("largest = %+v, want names %v", got[0], want)
	}
	if len(got[1].Names) != 5 || got[1].SizeBytes != 200 {
		t.Errorf("second = %+v, want five names", got[1])
	}
	if all := Images(images, -1); len(all) != 3 {
		t.Errorf("no bound: %d images", len(all))
	}
}
