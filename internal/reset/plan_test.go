package reset

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/network"
)

var testOpts = Options{
	RootDir: "/var/lib/berth", PodLogsDir: "/var/log/pods", CgroupRoot: "/", Bridge: "berth0", Network: "berth",
	ManifestDir: "/var/lib/berth/manifests", ImagesDir: "/var/lib/berth/images",
	DevicePluginDir: "/var/lib/kubelet/device-plugins", PodResourcesDir: "/var/lib/kubelet/pod-resources",
}

func kinds(steps []Step) []StepKind {
	var out []StepKind
	for _, s := range steps {
		out = append(out, s.Kind)
	}
	return out
}

func TestPlan(t *testing.T) {
	full := Facts{
		State: []string{"/var/lib/berth/containerd"}, ContainerdPID: 10, ContainerdState: true,
		Processes: []int{20}, NetNS: []string{"/run/netns/cni-1"}, Rules: []*cnigc.Held{{ID: "1", Chains: []string{"CNI-1"}}},
		Bridge: true, Mounts: []string{"/var/lib/berth/containerd/state/x"}, Cgroups: []string{"/sys/fs/cgroup/kubepods"},
		PodLogDirs: []string{"/var/log/pods/a_b_u1"}, CNICache: []string{"/var/lib/cni/results/berth-1-eth0"},
		Masquerade: map[string][]string{"10.222.1.0/24": {"-A POSTROUTING -s 10.222.1.0/24 -j BERTH-MASQ-x"}},
	}
	external := testOpts
	external.RuntimeEndpoint = "unix:///run/crio.sock"
	for _, tc := range []struct {
		name    string
		o       Options
		f       Facts
		want    []StepKind
		running bool
	}{
		{"never ran", testOpts, Facts{}, nil, false},
		{"only the operator's files", testOpts, Facts{Foreign: []string{"/var/lib/berth/manifests"}}, nil, false},
		// A bridge and cgroups of berth's names, but no state of berth:
		// another agent's, or a reset already done.
		{"names but no state", testOpts, Facts{Bridge: true, Cgroups: []string{"/sys/fs/cgroup/kubepods"}}, nil, false},
		{"running berth", testOpts, Facts{AdminSocketAnswers: true, State: []string{"x"}}, nil, true},
		{"everything", testOpts, full,
			[]StepKind{StopPods, StopContainerd, KillProcesses, RemoveNetNS, RemoveRules, RemoveMasquerade, RemoveCNICache, DeleteBridge, Unmount, RemoveCgroups, RemovePodLogs, RemoveState}, false},
		// The bridge of a pod CIDR that changed, without the configured one.
		{"only the range's bridge", testOpts, Facts{State: []string{"/var/lib/berth/cni"}, RangeBridge: "berth0-1a2b"},
			[]StepKind{DeleteBridge, RemoveState}, false},
		{"containerd state, none running", testOpts, Facts{State: []string{"/var/lib/berth/containerd"}, ContainerdState: true},
			[]StepKind{StopPods, StopContainerd, RemoveState}, false},
		// Processes in /kubepods with no state of berth: the kubelet's pods.
		{"processes in kubepods but no state", testOpts, Facts{Processes: []int{5}, Cgroups: []string{"/sys/fs/cgroup/kubepods"}}, nil, false},
		{"pods and cgroups, state without containerd", testOpts,
			Facts{State: []string{"/var/lib/berth/pods"}, Processes: []int{5}, Cgroups: []string{"/sys/fs/cgroup/kubepods"}},
			[]StepKind{KillProcesses, RemoveCgroups, RemoveState}, false},
		{"a containerd of this root still runs, no other state", testOpts, Facts{ContainerdPID: 7},
			[]StepKind{StopPods, StopContainerd}, false},
		{"mounts left under the root", testOpts, Facts{Mounts: []string{"/var/lib/berth/pods/u/volumes/x"}},
			[]StepKind{Unmount}, false},
		{"external runtime: its pods, no containerd", external, Facts{State: []string{"/var/lib/berth/pods"}},
			[]StepKind{StopPods, RemoveState}, false},
	} {
		steps, err := Plan(tc.o, tc.f)
		var re *RunningError
		if tc.running != errors.As(err, &re) || (!tc.running && err != nil) {
			t.Errorf("%s: error %v, want running %v", tc.name, err, tc.running)
		}
		if got := kinds(steps); !slices.Equal(got, tc.want) {
			t.Errorf("%s: steps %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestClassifyRootEntries(t *testing.T) {
	o := testOpts
	o.PodLogsDir = "/var/lib/berth/pod-logs"
	o.DevicePluginDir = "/var/lib/berth/device-plugins"
	state, foreign := ClassifyRootEntries(o, []string{
		"containerd", "cni", "local-pods", "terminal-pods", "probes", "pods", "pki", "seccomp", "berth.sock",
		"probes.corrupt-20261127T120000.000000000Z", // set aside by quarantine
		"manifests", "images", "pod-logs", "device-plugins", "berth.log", "notes.txt",
	})
	wantState := []string{"containerd", "cni", "local-pods", "terminal-pods", "probes", "pods", "pki", "seccomp", "berth.sock",
		"probes.corrupt-20261127T120000.000000000Z"}
	wantForeign := []string{"manifests", "images", "pod-logs", "device-plugins", "berth.log", "notes.txt"}
	if !slices.Equal(state, prefixed(o.RootDir, wantState)) {
		t.Errorf("state %v", state)
	}
	if !slices.Equal(foreign, prefixed(o.RootDir, wantForeign)) {
		t.Errorf("foreign %v", foreign)
	}
	// The manifest dir is the operator's even with a name berth uses.
	o.ManifestDir = "/var/lib/berth/pods/static"
	if state, _ := ClassifyRootEntries(o, []string{"pods"}); len(state) != 0 {
		t.Errorf("a manifest dir inside pods/ was taken for state: %v", state)
	}
}

func TestChildOf(t *testing.T) {
	for _, tc := range []struct {
		root, dir, want string
		ok              bool
	}{
		{"/r", "/r/manifests", "manifests", true},
		{"/r", "/r/a/b", "a", true},
		{"/r/", "/r/a/", "a", true},
		{"/r", "/r", "", false},
		{"/r", "/rr/a", "", false},
		{"/r", "/etc", "", false},
		{"/r", "", "", false},
	} {
		got, ok := childOf(tc.root, tc.dir)
		if got != tc.want || ok != tc.ok {
			t.Errorf("childOf(%q, %q) = %q %v, want %q %v", tc.root, tc.dir, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSelectPodLogDirs(t *testing.T) {
	names := []string{"default_web_u1", "kube-system_dns_u2", "default_other_u9", "u1", "default__u1", "a_b_c_u1", "_web_u1"}
	got := SelectPodLogDirs(names, []string{"u1", "u2", ""})
	if want := []string{"default_web_u1", "kube-system_dns_u2"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := SelectPodLogDirs(names, nil); len(got) != 0 {
		t.Errorf("no known pods, got %v", got)
	}
}

func TestSelectBerthFiles(t *testing.T) {
	got := SelectBerthFiles([]string{"kubelet.sock", "kubelet_internal_checkpoint", "nvidia.sock",
		"kubelet_internal_checkpoint.corrupt-20261127T120000.000000000Z", "kubelet.sock.bak"})
	want := []string{"kubelet.sock", "kubelet_internal_checkpoint", "kubelet_internal_checkpoint.corrupt-20261127T120000.000000000Z"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestMatchNetNS(t *testing.T) {
	named := map[string]uint64{"/run/netns/cni-a": 1, "/run/netns/cni-b": 2, "/run/netns/dead": 0}
	got := MatchNetNS(named, map[uint64]bool{2: true, 0: true, 7: true})
	if want := []string{"/run/netns/cni-b"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// confListNetwork reads back what network.WriteConfList wrote.
func TestConfListNetwork(t *testing.T) {
	o := Options{RootDir: t.TempDir()}
	if b, c := confListNetwork(o); b != "" || c != "" {
		t.Errorf("no conflist: %q %q", b, c)
	}
	dir := filepath.Join(o.RootDir, "cni", "net.d")
	if err := network.WriteConfList(dir, network.Bridge{Name: "berth", Interface: "berth0-1a2b", PodCIDR: "10.222.1.0/24", IPAMDir: "/x"}); err != nil {
		t.Fatal(err)
	}
	if b, c := confListNetwork(o); b != "berth0-1a2b" || c != "10.222.1.0/24" {
		t.Errorf("confListNetwork = %q %q", b, c)
	}
}
