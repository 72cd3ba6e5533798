package checkpoint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// benchPool is one device plugin's healthy devices and what its Allocate
// answers for a set of them.
type benchPool struct {
	resource string
	ids      []string
	numa     func(i int) int64
	respond  func(ids []string) *pluginapi.ContainerAllocateResponse
	next     int
}

func (p *benchPool) take(n int) (DevicesPerNUMA, []byte, error) {
	if p.next+n > len(p.ids) {
		return nil, nil, fmt.Errorf("%s: pool of %d exhausted", p.resource, len(p.ids))
	}
	ids := DevicesPerNUMA{}
	for i := p.next; i < p.next+n; i++ {
		node := p.numa(i)
		ids[node] = append(ids[node], p.ids[i])
	}
	taken := p.ids[p.next : p.next+n]
	p.next += n
	// Deterministic, as the device manager's marshalResponse stores it.
	resp, err := proto.MarshalOptions{Deterministic: true}.Marshal(p.respond(taken))
	return ids, resp, err
}

// benchPools are the plugins of a two-socket node: 16 GPUs time-sliced
// into 64 replicas each (the NVIDIA plugin's "<uuid>::<n>" IDs, with CDI
// names), 512 SR-IOV VFs behind vfio, and KubeVirt's 1,000 /dev/kvm
// devices, which report no topology.
func benchPools() []*benchPool {
	gpu := &benchPool{resource: "nvidia.com/gpu", numa: func(i int) int64 { return int64(i / 512) }}
	for g := range 16 {
		for r := range 64 {
			gpu.ids = append(gpu.ids, fmt.Sprintf("GPU-%08x-5e1f-4c2a-9b7d-%012x::%d", 0x3a9c0000+g, 0x1f2e3d4c5b00+g, r))
		}
	}
	gpu.respond = func(ids []string) *pluginapi.ContainerAllocateResponse {
		uuids := make([]string, len(ids))
		cdi := make([]*pluginapi.CDIDevice, len(ids))
		for i, id := range ids {
			uuids[i], _, _ = strings.Cut(id, "::")
			cdi[i] = &pluginapi.CDIDevice{Name: "k8s.device-plugin.nvidia.com/gpu=" + uuids[i]}
		}
		return &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(uuids, ","), "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
			Devices: []*pluginapi.DeviceSpec{
				{ContainerPath: "/dev/nvidiactl", HostPath: "/dev/nvidiactl", Permissions: "rw"},
				{ContainerPath: "/dev/nvidia-uvm", HostPath: "/dev/nvidia-uvm", Permissions: "rw"},
			},
			CdiDevices: cdi,
		}
	}

	nic := &benchPool{resource: "intel.com/sriov_netdevice", numa: func(i int) int64 { return int64(i / 256) }}
	for pf := range 8 {
		for vf := range 64 {
			nic.ids = append(nic.ids, fmt.Sprintf("0000:%02x:%02x.%d", 0x3b+pf*0x40, 2+vf/8, vf%8))
		}
	}
	nic.respond = func(ids []string) *pluginapi.ContainerAllocateResponse {
		resp := &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{
				"PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE":      strings.Join(ids, ","),
				"PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE_INFO": fmt.Sprintf(`{"%s":{"generic":{"deviceID":"%s"},"vfio":{"mount":"/dev/vfio/vfio"}}}`, ids[0], ids[0]),
			},
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/vfio/vfio", HostPath: "/dev/vfio/vfio", Permissions: "rw"}},
		}
		for _, id := range ids {
			group := fmt.Sprintf("/dev/vfio/%d", 100+len(id)+int(id[len(id)-1]))
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: group, HostPath: group, Permissions: "rw"})
		}
		return resp
	}

	kvm := &benchPool{resource: "devices.kubevirt.io/kvm", numa: func(int) int64 { return -1 }}
	for i := range 1000 {
		kvm.ids = append(kvm.ids, fmt.Sprintf("kvm%d", i))
	}
	kvm.respond = func([]string) *pluginapi.ContainerAllocateResponse {
		return &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/kvm", HostPath: "/dev/kvm", Permissions: "rw"}},
		}
	}
	return []*benchPool{gpu, nic, kvm}
}

// benchRequest is one container's request of one resource.
type benchRequest struct {
	pool *benchPool
	n    int
}

// benchCheckpoint returns n entries as the device manager's
// toCheckpointData hands them to Encode (sorted by pod, container and
// resource), and the registered devices it writes beside them. Pods have
// one to three containers; a container holds one or two GPU replicas, a VF,
// both, or /dev/kvm.
func benchCheckpoint(n int) ([]PodDevicesEntry, map[string][]string, error) {
	pools := benchPools()
	gpu, nic, kvm := pools[0], pools[1], pools[2]
	var entries []PodDevicesEntry
	for pod := 0; len(entries) < n; pod++ {
		uid := fmt.Sprintf("%08x-%04x-4%03x-9%03x-%012x", 0x7c1e0000+pod*2654435761%0xffff, pod%0xffff, pod%0xfff, (pod*7)%0xfff, 0xa1b2c3d40000+pod)
		for c := range 1 + pod%3 {
			name := [...]string{"app", "istio-proxy", "log-shipper"}[c]
			var want []benchRequest
			switch (pod + c) % 5 {
			case 0, 1:
				want = []benchRequest{{gpu, 1 + (pod+c)%5}}
			case 2:
				want = []benchRequest{{nic, 1}}
			case 3:
				want = []benchRequest{{gpu, 1}, {nic, 1}}
			case 4:
				want = []benchRequest{{kvm, 1}}
			}
			for _, w := range want {
				if len(entries) == n {
					break
				}
				ids, resp, err := w.pool.take(w.n)
				if err != nil {
					return nil, nil, err
				}
				entries = append(entries, PodDevicesEntry{PodUID: uid, ContainerName: name, ResourceName: w.pool.resource, DeviceIDs: ids, AllocResp: resp})
			}
		}
	}
	slices.SortFunc(entries, func(a, b PodDevicesEntry) int {
		return cmp.Or(cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.ContainerName, b.ContainerName), cmp.Compare(a.ResourceName, b.ResourceName))
	})
	registered := map[string][]string{}
	for _, p := range pools {
		registered[p.resource] = slices.Sorted(slices.Values(p.ids))
	}
	return entries, registered, nil
}

// BenchmarkCheckpointWrite1000 times what the device manager's
// writeCheckpointLocked does once the content changed: Encode (UTF-8 check,
// go-spew checksum, JSON) and Write (temporary file, fsync, rename, fsync of
// the directory). Building the entries from the bookkeeping
// (toCheckpointData, which marshals each AllocateResponse) belongs to the
// devicemanager package and is not included; the entries already hold those
// bytes.
func BenchmarkCheckpointWrite1000(b *testing.B) {
	entries, registered, err := benchCheckpoint(1000)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	data, err := Encode(entries, registered)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		data, err := Encode(entries, registered)
		if err != nil {
			b.Fatal(err)
		}
		if err := Write(dir, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointEncode1000 is the CPU half of
// BenchmarkCheckpointWrite1000, to tell it from the two fsyncs, whose cost
// is the disk's.
func BenchmarkCheckpointEncode1000(b *testing.B) {
	entries, registered, err := benchCheckpoint(1000)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var size int
	for b.Loop() {
		data, err := Encode(entries, registered)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.SetBytes(int64(size))
}

// BenchmarkCheckpointRead1000 times the device manager's restore up to its
// bookkeeping: Read, then Decode, which parses the file and verifies its
// checksum.
func BenchmarkCheckpointRead1000(b *testing.B) {
	entries, registered, err := benchCheckpoint(1000)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	data, err := Encode(entries, registered)
	if err != nil {
		b.Fatal(err)
	}
	if err := Write(dir, data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		data, err := Read(dir)
		if err != nil {
			b.Fatal(err)
		}
		got, _, format, err := Decode(data)
		if err != nil || format != FormatV2 || len(got) != len(entries) {
			b.Fatalf("Decode: %d entries, format %v, %v; want %d, v2", len(got), format, err, len(entries))
		}
	}
}
