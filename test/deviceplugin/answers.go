package deviceplugin

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// deviceList is the ListAndWatch answer for devs, with the devices in
// unhealthy reported Unhealthy.
func deviceList(devs []Device, unhealthy map[string]bool) *pluginapi.ListAndWatchResponse {
	resp := &pluginapi.ListAndWatchResponse{Devices: make([]*pluginapi.Device, 0, len(devs))}
	for _, d := range devs {
		health := pluginapi.Healthy
		if unhealthy[d.ID] {
			health = pluginapi.Unhealthy
		}
		var topo *pluginapi.TopologyInfo
		if len(d.NUMA) > 0 {
			topo = &pluginapi.TopologyInfo{}
			for _, n := range d.NUMA {
				topo.Nodes = append(topo.Nodes, &pluginapi.NUMANode{ID: n})
			}
		}
		resp.Devices = append(resp.Devices, &pluginapi.Device{ID: d.ID, Health: health, Topology: topo})
	}
	return resp
}

// containerAllocation is the Allocate answer for one container given ids,
// in the order the agent asked for them.
func containerAllocation(ids []string, hostPath string, mounts map[string][]*pluginapi.Mount) *pluginapi.ContainerAllocateResponse {
	joined := strings.Join(ids, ",")
	resp := &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{EnvDevices: joined},
		Annotations: map[string]string{AnnotationDeviceIDs: joined},
	}
	for _, id := range ids {
		resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{
			HostPath:      hostPath,
			ContainerPath: "/dev/" + id,
			Permissions:   "rw",
		})
		for _, m := range mounts[id] {
			resp.Mounts = append(resp.Mounts, proto.CloneOf(m))
		}
	}
	return resp
}

// unknownDevice returns the first of ids not in devs, if any.
func unknownDevice(ids []string, devs []Device) (string, bool) {
	for _, id := range ids {
		if !slices.ContainsFunc(devs, func(d Device) bool { return d.ID == id }) {
			return id, true
		}
	}
	return "", false
}

// preferredDevices picks size devices: all of mustInclude, then the lowest
// of available. The answer is sorted; it is shorter than size when there
// are not enough devices, and longer when mustInclude alone is.
func preferredDevices(available, mustInclude []string, size int) []string {
	chosen := make([]string, 0, max(size, len(mustInclude)))
	taken := make(map[string]bool, cap(chosen))
	take := func(id string) {
		if !taken[id] {
			taken[id] = true
			chosen = append(chosen, id)
		}
	}
	for _, id := range mustInclude {
		take(id)
	}
	rest := slices.Clone(available)
	slices.SortFunc(rest, compareIDs)
	for _, id := range rest {
		if len(chosen) >= size {
			break
		}
		take(id)
	}
	slices.SortFunc(chosen, compareIDs)
	return chosen
}

// compareIDs orders device IDs the way a person counts them: runs of digits
// compare as numbers, so widget-2 comes before widget-10.
func compareIDs(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			na, ra := leadingDigits(a)
			nb, rb := leadingDigits(b)
			if c := compareNumerals(na, nb); c != 0 {
				return c
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func leadingDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// compareNumerals compares two runs of decimal digits by value, and equal
// values by length so that "01" and "1" still have an order.
func compareNumerals(a, b string) int {
	ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(ta) != len(tb) {
		return len(ta) - len(tb)
	}
	if c := strings.Compare(ta, tb); c != 0 {
		return c
	}
	return len(a) - len(b)
}
