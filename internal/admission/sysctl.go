package admission

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// ReasonSysctlForbidden is the kubelet's reason for a pod whose sysctls the
// node does not allow (pkg/kubelet/sysctl.ForbiddenReason).
const ReasonSysctlForbidden = "SysctlForbidden"

// noPreemptionSysctl explains why a pod refused for its sysctls preempts
// nothing, critical or not.
const noPreemptionSysctl = "its sysctls are refused by the node's allowlist, which preempting pods cannot change"

// A sysctl pattern as the API server validates one (policy validation's
// IsValidSysctlPattern): dot- or slash-separated segments, the last of
// which may end in '*', at most 253 characters. The kubelet checks every
// pattern of its allowlist against it at start-up.
const (
	sysctlMaxLength     = 253
	sysctlSegment       = `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`
	sysctlPatternFormat = `(` + sysctlSegment + `[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`
)

var sysctlPattern = regexp.MustCompile(`^` + sysctlPatternFormat + `$`)

// kernelOSRelease is where the kubelet reads the running kernel's version
// (pkg/util/kernel.GetVersion): the release uname reports.
const kernelOSRelease = "/proc/sys/kernel/osrelease"

// safeSysctl is a sysctl the kubelet allows every pod, from the kernel
// version on which it is namespaced (empty: any).
type safeSysctl struct {
	name   string
	kernel string
}

// safeSysctls is the kubelet's list (pkg/kubelet/sysctl/safe_sysctls.go),
// with the kernel versions of pkg/util/kernel/constants.go: namespaced, and
// with no effect on other pods. On an older kernel the later ones would
// change the host's value, so they are not safe there.
var safeSysctls = []safeSysctl{
	{name: "kernel.shm_rmid_forced"},
	{name: "net.ipv4.ip_local_port_range"},
	{name: "net.ipv4.tcp_syncookies"},
	{name: "net.ipv4.ping_group_range"},
	{name: "net.ipv4.ip_unprivileged_port_start"},
	{name: "net.ipv4.ip_local_reserved_ports", kernel: "3.16"},
	{name: "net.ipv4.tcp_keepalive_time", kernel: "4.5"},
	{name: "net.ipv4.tcp_fin_timeout", kernel: "4.6"},
	{name: "net.ipv4.tcp_keepalive_intvl", kernel: "4.5"},
	{name: "net.ipv4.tcp_keepalive_probes", kernel: "4.5"},
	{name: "net.ipv4.tcp_rmem", kernel: "4.15"},
	{name: "net.ipv4.tcp_wmem", kernel: "4.15"},
}

// SafeSysctls are the safe sysctls on a node running kernel, as the
// kubelet's getSafeSysctlAllowlist has them: those namespaced only from some
// version on are left out when the kernel is older, or unknown (nil).
func SafeSysctls(kernel *version.Version) []string {
	var out []string
	for _, s := range safeSysctls {
		if s.kernel == "" || kernel != nil && kernel.AtLeast(version.MustParseGeneric(s.kernel)) {
			out = append(out, s.name)
		}
	}
	return out
}

// KernelVersion is the running kernel's version, read as the kubelet's
// kernel.GetVersion reads it.
func KernelVersion() (*version.Version, error) {
	return kernelVersion(os.ReadFile)
}

func kernelVersion(readFile func(string) ([]byte, error)) (*version.Version, error) {
	data, err := readFile(kernelOSRelease)
	if err != nil {
		return nil, fmt.Errorf("reading the kernel version: %w", err)
	}
	v, err := version.ParseGeneric(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("parsing the kernel version %s: %w", kernelOSRelease, err)
	}
	return v, nil
}

// SysctlAllowlist is the node's sysctl admission: the sysctls and sysctl
// prefixes a pod may set, each with the kernel namespace it belongs to. The
// zero value (or nil) allows none.
type SysctlAllowlist struct {
	sysctls  map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// NewSysctlAllowlist is the kubelet's NewAllowlist: every pattern (a name,
// or a prefix ending in '*') must be valid and known to be namespaced,
// since a sysctl that is not would be set on the host for every pod. The
// kubelet passes the safe sysctls and allowedUnsafeSysctls together.
func NewSysctlAllowlist(patterns []string) (*SysctlAllowlist, error) {
	w := &SysctlAllowlist{
		sysctls:  map[string]utilsysctl.Namespace{},
		prefixes: map[string]utilsysctl.Namespace{},
	}
	for _, p := range patterns {
		if len(p) > sysctlMaxLength || !sysctlPattern.MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most %d characters and match regex %s",
				p, sysctlMaxLength, sysctlPatternFormat)
		}
		ns, nameOrPrefix, prefixed := utilsysctl.GetNamespace(p)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", nameOrPrefix)
		}
		if prefixed {
			w.prefixes[nameOrPrefix] = ns
		} else {
			w.sysctls[nameOrPrefix] = ns
		}
	}
	return w, nil
}

// Rejection is the kubelet's sysctl admit handler (patternAllowlist.Admit):
// the first of the pod's sysctls that is not allowed refuses the pod. It
// reports false when the pod passes, as one without sysctls always does.
func (w *SysctlAllowlist) Rejection(pod *v1.Pod) (Result, bool) {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return Result{}, false
	}
	for _, s := range sc.Sysctls {
		if err := w.check(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return Result{Reason: ReasonSysctlForbidden, Message: fmt.Sprintf("forbidden sysctl: %v", err),
				NoPreemption: noPreemptionSysctl}, true
		}
	}
	return Result{}, false
}

// check is the kubelet's validateSysctl, with its messages word for word: a
// sysctl must be allowed by name or by prefix, and one of the net or ipc
// namespace is refused to a pod that shares that namespace with the host,
// where setting it would change the host's value.
func (w *SysctlAllowlist) check(name string, hostNet, hostIPC bool) error {
	name = utilsysctl.NormalizeName(name)
	ns, found := w.namespaceOf(name)
	switch {
	case !found:
		return fmt.Errorf("%q not allowlisted", name)
	case ns == utilsysctl.IPCNamespace && hostIPC, ns == utilsysctl.NetNamespace && hostNet:
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}

// namespaceOf finds the allowlist's entry for a normalized sysctl name: the
// name itself, else a prefix of it.
func (w *SysctlAllowlist) namespaceOf(name string) (utilsysctl.Namespace, bool) {
	if w == nil {
		return utilsysctl.UnknownNamespace, false
	}
	if ns, ok := w.sysctls[name]; ok {
		return ns, true
	}
	for p, ns := range w.prefixes {
		if strings.HasPrefix(name, p) {
			return ns, true
		}
	}
	return utilsysctl.UnknownNamespace, false
}
