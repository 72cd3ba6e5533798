package devicemanager

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
)

func TestPodDevices(t *testing.T) {
	resp := func(env string) *pluginapi.ContainerAllocateResponse {
		return &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"E": env}}
	}
	pdev := podDevices{}
	pdev.insert("p1", "c1", "r1", checkpoint.DevicesPerNUMA{0: {"d2", "d1"}, 1: {"d3"}}, resp("a"))
	pdev.insert("p1", "c2", "r1", checkpoint.DevicesPerNUMA{-1: {"d4"}}, resp("b"))
	pdev.insert("p2", "c1", "r2", checkpoint.DevicesPerNUMA{-1: {"x"}}, resp("c"))
	pdev.insert("p3", "c1", "r1", checkpoint.DevicesPerNUMA{-1: {"d9"}}, nil) // no response: not counted

	if got := pdev.containerDevices("p1", "c1", "r1"); !got.Equal(sets.New("d1", "d2", "d3")) {
		t.Errorf("containerDevices = %v", sets.List(got))
	}
	for _, missing := range [][3]string{{"p9", "c1", "r1"}, {"p1", "c9", "r1"}, {"p1", "c1", "r9"}} {
		if got := pdev.containerDevices(missing[0], missing[1], missing[2]); got != nil {
			t.Errorf("containerDevices%v = %v, want nil", missing, got)
		}
	}
	if got := pdev.pods(); !got.Equal(sets.New("p1", "p2", "p3")) {
		t.Errorf("pods = %v", sets.List(got))
	}
	devs := pdev.devices()
	if !devs["r1"].Equal(sets.New("d1", "d2", "d3", "d4")) || !devs["r2"].Equal(sets.New("x")) {
		t.Errorf("devices = %v", devs)
	}
	// insert replaces.
	pdev.insert("p1", "c2", "r1", checkpoint.DevicesPerNUMA{-1: {"d5"}}, resp("b"))
	if got := pdev.containerDevices("p1", "c2", "r1"); !got.Equal(sets.New("d5")) {
		t.Errorf("after replace = %v", sets.List(got))
	}

	reusable := map[string]sets.Set[string]{}
	pdev.addContainerAllocatedResources("p1", "c1", reusable)
	pdev.addContainerAllocatedResources("p1", "c2", reusable)
	pdev.removeContainerAllocatedResources("p1", "c1", reusable)
	if !reusable["r1"].Equal(sets.New("d5")) {
		t.Errorf("reusable = %v", reusable)
	}

	// Entries come out sorted, and load back to the same bookkeeping.
	entries := pdev.toCheckpointData()
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.PodUID+"/"+e.ContainerName+"/"+e.ResourceName)
	}
	if want := []string{"p1/c1/r1", "p1/c2/r1", "p2/c1/r2"}; !slices.Equal(keys, want) {
		t.Errorf("entries = %v, want %v (sorted, p3 without response left out)", keys, want)
	}
	if !slices.Equal(entries[0].DeviceIDs[0], []string{"d1", "d2"}) {
		t.Errorf("devices of a NUMA node are not sorted: %v", entries[0].DeviceIDs)
	}
	loaded := podDevices{}
	if errs := loaded.fromCheckpointData(entries); errs != nil {
		t.Fatal(errs)
	}
	if again := loaded.toCheckpointData(); !reflect.DeepEqual(again, entries) {
		t.Errorf("round trip:\n got %+v\nwant %+v", again, entries)
	}

	pdev.delete("p1", "p9")
	if got := pdev.pods(); !got.Equal(sets.New("p2", "p3")) {
		t.Errorf("after delete pods = %v", sets.List(got))
	}

	// An entry whose response does not decode is skipped, the rest load.
	bad := podDevices{}
	errs := bad.fromCheckpointData([]checkpoint.PodDevicesEntry{
		{PodUID: "p", ContainerName: "c", ResourceName: "r", DeviceIDs: checkpoint.DevicesPerNUMA{-1: {"d"}}, AllocResp: []byte{0xff}},
		entries[2],
	})
	if len(errs) != 1 || !bad.pods().Equal(sets.New("p2")) {
		t.Errorf("errs = %v, pods = %v", errs, sets.List(bad.pods()))
	}
}

// The kubelet's own checkpoint loads and writes back the same entries,
// allocation responses byte for byte.
func TestKubeletCheckpointRoundTrip(t *testing.T) {
	data, err := os.ReadFile("../../../shared/testdata/checkpoint/v2_single_numa.json")
	if err != nil {
		t.Fatalf("test data (../shared beside the repo): %v", err)
	}
	entries, _, _, err := checkpoint.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	pdev := podDevices{}
	if errs := pdev.fromCheckpointData(entries); errs != nil {
		t.Fatal(errs)
	}
	out := pdev.toCheckpointData()
	if len(out) != 1 || !bytes.Equal(out[0].AllocResp, entries[0].AllocResp) || !reflect.DeepEqual(out[0].DeviceIDs, entries[0].DeviceIDs) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, entries)
	}
	opts, _ := pdev.deviceRunContainerOptions("pod1", "con1")
	if opts == nil || len(opts.Devices) != 2 || opts.Devices[0].HostPath != "/dev/r1dev1" || len(opts.Mounts) != 1 {
		t.Errorf("options from the kubelet's response = %v", opts)
	}
}
