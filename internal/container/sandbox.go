package container

// Why a pod needs a new sandbox, in the words of the kubelet's
// PodSandboxChanged. The sync plan acts on it; the pod status shows it.
const (
	SandboxMissing            = "no pod sandbox exists"
	SandboxMultipleReady      = "multiple pod sandboxes are ready"
	SandboxNotReady           = "pod sandbox is not ready"
	SandboxNetworkModeChanged = "pod sandbox network namespace mode changed"
	SandboxHasNoIP            = "pod sandbox has no IP address"
)

// SandboxChange says why a pod whose spec asks for hostNetwork needs a new
// sandbox, or "" when its newest sandbox (Sandboxes[0]) is ready, alone, in
// the right network mode and addressed.
func (s *PodStatus) SandboxChange(hostNetwork bool) string {
	if len(s.Sandboxes) == 0 {
		return SandboxMissing
	}
	ready := 0
	for _, sb := range s.Sandboxes {
		if sb.Ready {
			ready++
		}
	}
	newest := s.Sandboxes[0]
	switch {
	case ready > 1:
		return SandboxMultipleReady
	case !newest.Ready:
		return SandboxNotReady
	case newest.HostNetwork != hostNetwork:
		return SandboxNetworkModeChanged
	case !hostNetwork && newest.IP == "":
		return SandboxHasNoIP
	}
	return ""
}
