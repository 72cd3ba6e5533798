package devicemanager

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"

	"github.com/berth-dev/berth/test/deviceplugin"
)

// However admissions and container creations interleave, no device is held
// by two pods, and every device that is free goes to someone who asked.
// Half the pods are admitted; the other half reach ContainerOptions without
// a record (a container whose record was lost), the path that allocates
// outside admission.
func TestNoDeviceIsGivenTwice(t *testing.T) {
	dir := shortDir(t)
	m := startManager(t, dir)
	ids := []string{"w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"}
	startPlugin(t, deviceplugin.Config{Dir: dir, Devices: widgets(ids...), GetPreferredAllocationAvailable: true})
	eventually(t, "widgets are allocatable", func() bool { return allocatable(m.Manager, widget) == int64(len(ids)) })

	// One pod already holds w3 and w4, as a restart recovers it.
	m.mu.Lock()
	m.Manager.pods.fromCheckpointData(mustRebuild(t, `{"example.com/widget":["w3","w4"]}`))
	m.mu.Unlock()

	const pods = 12
	var wg sync.WaitGroup
	errs := make([]error, pods)
	for i := range pods {
		wg.Go(func() {
			pod := podWith(fmt.Sprintf("p%02d", i), 1)
			if i%2 == 0 {
				errs[i] = m.Admit(t.Context(), pod)
				return
			}
			_, errs[i] = m.ContainerOptions(t.Context(), pod, &pod.Spec.Containers[0])
		})
	}
	wg.Wait()

	owner := map[string]string{}
	for _, a := range m.Allocations() {
		for _, id := range a.DeviceIDs {
			if other, ok := owner[id]; ok && other != a.PodUID {
				t.Errorf("device %s is held by pods %s and %s", id, other, a.PodUID)
			}
			owner[id] = a.PodUID
		}
	}
	if owner["w3"] != "recovered" || owner["w4"] != "recovered" {
		t.Errorf("the recovered pod lost its devices: %v", owner)
	}
	granted := 0
	for i, err := range errs {
		if err == nil {
			granted++
		} else if got := held(m.Manager, fmt.Sprintf("p%02d", i)); len(got) != 0 {
			t.Errorf("pod p%02d failed (%v) yet holds %v", i, err, got)
		}
	}
	if free := len(ids) - 2; granted != free || len(owner) != len(ids) {
		t.Errorf("%d pods got a widget, %d devices held; want %d and %d (%v)", granted, len(owner), free, len(ids), owner)
	}
	if held := sets.KeySet(owner); !held.Equal(sets.New(ids...)) {
		t.Errorf("held devices %v", sets.List(held))
	}
}

// mustRebuild returns the entries of a container of pod "recovered" whose
// annotation is value.
func mustRebuild(t *testing.T, value string) []checkpoint.PodDevicesEntry {
	t.Helper()
	entries, problems := rebuildFromContainers(
		[]*runtimeapi.Container{criContainer("c", "recovered", "app", 1, value)})
	if len(problems) != 0 || len(entries) == 0 {
		t.Fatalf("rebuild: %v %v", entries, problems)
	}
	return entries
}
