package admission

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// sysctlPod is a pod that sets sysctls (name=value each), with opts applied.
func sysctlPod(sysctls []string, opts ...func(*v1.PodSpec)) *v1.Pod {
	pod := &v1.Pod{}
	if sysctls != nil {
		pod.Spec.SecurityContext = &v1.PodSecurityContext{}
	}
	for _, s := range sysctls {
		name, value, _ := strings.Cut(s, "=")
		pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: name, Value: value})
	}
	for _, o := range opts {
		o(&pod.Spec)
	}
	return pod
}

func hostNetwork(s *v1.PodSpec) { s.HostNetwork = true }
func hostIPC(s *v1.PodSpec)     { s.HostIPC = true }

func TestSysctlRejection(t *testing.T) {
	safe := SafeSysctls(version.MustParseGeneric("6.1.0"))
	withUnsafe, err := NewSysctlAllowlist(append(safe, "kernel.sem", "kernel.msg*", "net.core.*"))
	if err != nil {
		t.Fatal(err)
	}
	safeOnly, err := NewSysctlAllowlist(safe)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		list    *SysctlAllowlist
		pod     *v1.Pod
		wantMsg string // empty: admitted
	}{
		{"no security context", safeOnly, sysctlPod(nil), ""},
		{"no sysctls", safeOnly, sysctlPod([]string{}), ""},
		{"safe", safeOnly, sysctlPod([]string{"kernel.shm_rmid_forced=1", "net.ipv4.tcp_rmem=4096 87380 6291456"}), ""},
		{"unsafe", safeOnly, sysctlPod([]string{"kernel.msgmax=10000"}),
			`forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{"the first refused is named", safeOnly, sysctlPod([]string{"kernel.shm_rmid_forced=1", "kernel.sem=1", "kernel.msgmax=1"}),
			`forbidden sysctl: "kernel.sem" not allowlisted`},
		{"allowed unsafe, exact", withUnsafe, sysctlPod([]string{"kernel.sem=250 32000 100 128"}), ""},
		{"allowed unsafe, by prefix", withUnsafe, sysctlPod([]string{"kernel.msgmax=10000", "net.core.somaxconn=1024"}), ""},
		{"a prefix allows only what it starts", withUnsafe, sysctlPod([]string{"kernel.shmmax=1"}),
			`forbidden sysctl: "kernel.shmmax" not allowlisted`},
		{"slash form, safe", safeOnly, sysctlPod([]string{"net/ipv4/ip_local_port_range=1024 65535"}), ""},
		{"slash form, by prefix", withUnsafe, sysctlPod([]string{"kernel/msgmnb=65536"}), ""},
		{"slash form, refused under its dotted name", safeOnly, sysctlPod([]string{"net/ipv4/conf/eth0.100/rp_filter=0"}),
			`forbidden sysctl: "net.ipv4.conf.eth0/100.rp_filter" not allowlisted`},
		{"host network, net sysctl", safeOnly, sysctlPod([]string{"net.ipv4.tcp_syncookies=1"}, hostNetwork),
			`forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled`},
		{"host network, net sysctl by prefix", withUnsafe, sysctlPod([]string{"net.core.somaxconn=1024"}, hostNetwork),
			`forbidden sysctl: "net.core.somaxconn" not allowed with host Net enabled`},
		{"host network, ipc sysctl", safeOnly, sysctlPod([]string{"kernel.shm_rmid_forced=1"}, hostNetwork), ""},
		{"host IPC, kernel.shm_rmid_forced", safeOnly, sysctlPod([]string{"kernel.shm_rmid_forced=1"}, hostIPC),
			`forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{"host IPC, kernel.msg*", withUnsafe, sysctlPod([]string{"kernel.msgmax=10000"}, hostIPC),
			`forbidden sysctl: "kernel.msgmax" not allowed with host IPC enabled`},
		{"host IPC, net sysctl", safeOnly, sysctlPod([]string{"net.ipv4.tcp_syncookies=1"}, hostIPC), ""},
		{"nil allowlist refuses every sysctl", nil, sysctlPod([]string{"kernel.shm_rmid_forced=1"}),
			`forbidden sysctl: "kernel.shm_rmid_forced" not allowlisted`},
		{"nil allowlist, no sysctls", nil, sysctlPod(nil), ""},
	} {
		r, bad := tc.list.Rejection(tc.pod)
		if bad != (tc.wantMsg != "") {
			t.Errorf("%s: refused = %v (%+v), want %v", tc.name, bad, r, tc.wantMsg != "")
			continue
		}
		if !bad {
			continue
		}
		if r.Reason != ReasonSysctlForbidden || r.Message != tc.wantMsg || r.Admit || r.NoPreemption == "" {
			t.Errorf("%s: %+v, want reason %s, message %q and no preemption", tc.name, r, ReasonSysctlForbidden, tc.wantMsg)
		}
	}
}

func TestNewSysctlAllowlist(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		wantErr  string // empty: valid
	}{
		{[]string{"kernel.msg*", "net.*", "kernel.sem", "fs.mqueue.*", "net/ipv4/conf/eth0.100/rp_filter"}, ""},
		{nil, ""},
		{[]string{"kernel.panic"}, `the sysctls "kernel.panic" are not known to be namespaced`},
		{[]string{"kernel.*"}, `the sysctls "kernel." are not known to be namespaced`},
		{[]string{"Kernel.Msgmax"}, `sysctl "Kernel.Msgmax" must have at most 253 characters and match regex`},
		{[]string{"kernel.msg*max"}, `sysctl "kernel.msg*max" must have at most`},
		{[]string{"net." + strings.Repeat("a", 250)}, `must have at most 253 characters`},
	} {
		_, err := NewSysctlAllowlist(tc.patterns)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.patterns, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: err = %v, want %q", tc.patterns, err, tc.wantErr)
		}
	}
}

func TestSafeSysctls(t *testing.T) {
	always := []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"}
	for _, tc := range []struct {
		kernel *version.Version
		extra  []string
	}{
		{nil, nil},
		{version.MustParseGeneric("3.10.0"), nil},
		{version.MustParseGeneric("4.5.0"), []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
			"net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}},
		{version.MustParseGeneric("6.1.0"), []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
			"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
			"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}},
	} {
		got := SafeSysctls(tc.kernel)
		want := append(slices.Clone(always), tc.extra...)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("kernel %v: %v, want %v", tc.kernel, got, want)
		}
	}
	// Every safe sysctl is known to be namespaced, or the kubelet would
	// not start.
	if _, err := NewSysctlAllowlist(SafeSysctls(version.MustParseGeneric("6.18"))); err != nil {
		t.Error(err)
	}
}

func TestKernelVersion(t *testing.T) {
	read := func(content string, err error) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if path != kernelOSRelease {
				t.Errorf("read %s, want %s", path, kernelOSRelease)
			}
			return []byte(content), err
		}
	}
	v, err := kernelVersion(read("6.1.0-28-amd64\n", nil))
	if err != nil || v.String() != "6.1.0" || !v.AtLeast(version.MustParseGeneric("4.15")) {
		t.Errorf("6.1.0-28-amd64: %v, %v", v, err)
	}
	if _, err := kernelVersion(read("", fs.ErrNotExist)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want it to wrap ErrNotExist", err)
	}
	if _, err := kernelVersion(read("unknown", nil)); err == nil {
		t.Error("unparsable version accepted")
	}
}
