package chaos

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestMountsUnder(t *testing.T) {
	info := strings.Join([]string{
		`22 1 0:21 / / rw - ext4 /dev/sda1 rw`,
		`300 22 0:50 / /tmp/berth-chaos-1/containerd/state/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw - overlay overlay rw`,
		`301 22 0:51 / /tmp/berth-chaos-1/pods/u1/volumes/my\040vol rw - tmpfs tmpfs rw`,
		`302 22 0:52 / /tmp/berth-chaos-10/x rw - tmpfs tmpfs rw`,
		`303 22 0:53 / /tmp/berth-chaos-1 rw - tmpfs tmpfs rw`,
		``,
	}, "\n")
	got := MountsUnder(info, "/tmp/berth-chaos-1/")
	want := []string{
		"/tmp/berth-chaos-1/containerd/state/io.containerd.runtime.v2.task/k8s.io/abc/rootfs",
		"/tmp/berth-chaos-1/pods/u1/volumes/my vol",
		"/tmp/berth-chaos-1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestEnslavedTo(t *testing.T) {
	out := strings.Join([]string{
		`1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00`,
		`5: bchaos1a2b: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000\    link/ether 1a:2b brd ff:ff`,
		`6: veth1234@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue master bchaos1a2b state UP mode DEFAULT group default \    link/ether 3c:4d`,
		`7: veth5678@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue master be2e0001 state UP mode DEFAULT group default \    link/ether 5e:6f`,
	}, "\n")
	if got := EnslavedTo(out, "bchaos1a2b"); !slices.Equal(got, []string{"veth1234"}) {
		t.Errorf("got %q", got)
	}
	if got := EnslavedTo(out, "bchaos0000"); len(got) != 0 {
		t.Errorf("got %q for a bridge that does not exist", got)
	}
}

func TestNATRulesFor(t *testing.T) {
	save := strings.Join([]string{
		`*nat`,
		`:CNI-1644981fc25fd575cd8d64b2 - [0:0]`,
		`-A POSTROUTING -s 10.216.229.2/32 -m comment --comment "name: \"berth\" id: \"d659\"" -j CNI-1644981fc25fd575cd8d64b2`,
		`-A CNI-1644981fc25fd575cd8d64b2 -d 10.216.229.0/24 -m comment --comment "name: \"berth\" id: \"d659\"" -j ACCEPT`,
		`-A CNI-1644981fc25fd575cd8d64b2 ! -d 224.0.0.0/4 -j MASQUERADE`,
		`-A POSTROUTING -s 10.213.4.2/32 -j CNI-other`,
		`-A POSTROUTING -s 10.216.0.0/16 -j RETURN`,
		`COMMIT`,
	}, "\n")
	got := NATRulesFor(save, netip.MustParsePrefix("10.216.229.0/24"))
	if len(got) != 2 || !strings.Contains(got[0], "10.216.229.2/32") || !strings.Contains(got[1], "10.216.229.0/24") {
		t.Errorf("got %q", got)
	}
}

func TestDevicesFromInfo(t *testing.T) {
	info := `{"sandboxID":"s","pid":42,"config":{"metadata":{"name":"main"},"envs":[{"key":"PATH","value":"/bin"},{"key":"WIDGET_DEVICES","value":"w3,w1"}]}}`
	got, err := DevicesFromInfo(info, "WIDGET_DEVICES")
	if err != nil || !slices.Equal(got, []string{"w3", "w1"}) {
		t.Errorf("got %q, %v", got, err)
	}
	got, err = DevicesFromInfo(`{"config":{"envs":[{"key":"PATH","value":"/bin"}]}}`, "WIDGET_DEVICES")
	if err != nil || got != nil {
		t.Errorf("no devices: got %q, %v", got, err)
	}
	if _, err := DevicesFromInfo("", "WIDGET_DEVICES"); err == nil {
		t.Error("no error for an empty info")
	}
}

func TestNetnsFromInfo(t *testing.T) {
	info := `{"pid":7,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/cni-1234"}]}}}`
	if got, err := NetnsFromInfo(info); err != nil || got != "/var/run/netns/cni-1234" {
		t.Errorf("got %q, %v", got, err)
	}
	if got, err := NetnsFromInfo(`{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"}]}}}`); err != nil || got != "" {
		t.Errorf("host network: got %q, %v", got, err)
	}
}

func TestLeftoversViolations(t *testing.T) {
	l := Leftovers{Processes: []string{"42: containerd-shim"}, NAT: []string{"-A POSTROUTING -s 10.216.1.2/32"}}
	vs := l.Violations()
	if len(vs) != 2 || vs[0].Kind != "leak" || vs[1].Kind != KindNATLeak {
		t.Errorf("got %v", vs)
	}
	l = Leftovers{UnifiedCgroups: []string{"/sys/fs/cgroup/unified/x/pod1", "/sys/fs/cgroup/unified/x/pod2"}}
	if vs := l.Violations(); len(vs) != 1 || vs[0].Kind != KindUnifiedLeak || !strings.Contains(vs[0].Detail, "2 pod cgroups") {
		t.Errorf("unified leftovers: %v", vs)
	}
	if len((Leftovers{}).Violations()) != 0 {
		t.Error("violations from nothing left")
	}
}

func TestLayout(t *testing.T) {
	slots := Layout(40)
	names := map[string]bool{}
	applied, two, widgets := 0, 0, 0
	for _, s := range slots {
		if names[s.Name()] {
			t.Fatalf("two slots named %s", s.Name())
		}
		names[s.Name()] = true
		if s.Applied {
			applied++
		}
		if len(s.Containers) == 2 {
			two++
		}
		widgets += s.Widgets
	}
	if applied != 10 || two != 13 || widgets != 21 {
		t.Errorf("applied %d, two-container %d, widgets %d", applied, two, widgets)
	}
	if got := WidgetCapacity(slots, 3); got != 27 {
		t.Errorf("capacity %d, want the 21 asked for and 6 for one churn", got)
	}
	if got := WidgetCapacity(Layout(1)[:0], 3); got != 0 {
		t.Errorf("capacity with no pod asking: %d", got)
	}
}

func TestManifest(t *testing.T) {
	s := Slot{Index: 2, Gen: 3, Containers: []string{"main", "side"}, Widgets: 2, Probe: true}
	m := s.Manifest("img")
	for _, want := range []string{"name: chaos-s02", `chaos-gen: "3"`, "example.com/widget: 2", "readinessProbe", "image: img"} {
		if !strings.Contains(m, want) {
			t.Errorf("manifest lacks %q:\n%s", want, m)
		}
	}
	if strings.Count(m, "example.com/widget") != 1 {
		t.Errorf("widgets asked for by more than the first container:\n%s", m)
	}
	if got := s.FullName("n"); got != "chaos-s02-n" {
		t.Errorf("static full name %q", got)
	}
	if got := (Slot{Index: 3, Applied: true}).FullName("n"); got != "chaos-a03" {
		t.Errorf("applied full name %q", got)
	}
}

func TestDamageBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	data := []byte(`{"some":"state"}`)
	for range 100 {
		out, err := DamageBytes(r, Truncate, data)
		if err != nil || len(out) >= len(data) || string(out) != string(data[:len(out)]) {
			t.Fatalf("truncate: %q, %v", out, err)
		}
		out, err = DamageBytes(r, Garbage, data)
		if err != nil || len(out) == 0 || len(out) > 512 {
			t.Fatalf("garbage: %d bytes, %v", len(out), err)
		}
	}
	if _, err := DamageBytes(r, Directory, data); err == nil {
		t.Error("a directory is not a rewrite of bytes")
	}
}
