package config

import (
	"fmt"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/berth-dev/berth/internal/cm"
)

// Memory is how the node treats swap and out-of-memory kills. What depends
// on the host (swap on, the cgroup version) is checked at start-up, by
// cm.ResolveMemoryPolicy, as the kubelet checks it.
type Memory struct {
	// FailSwapOn refuses to start while swap is on (failSwapOn, default
	// true).
	FailSwapOn bool
	// SwapBehavior is memorySwap.swapBehavior: "" or NoSwap (the
	// default), or LimitedSwap.
	SwapBehavior string
	// SingleProcessOOMKill is singleProcessOOMKill, nil when unset: true on
	// cgroup v1, false on v2, where containers then get memory.oom.group.
	SingleProcessOOMKill *bool
}

func defaultMemory() Memory { return Memory{FailSwapOn: true} }

// Settings is what cm.ResolveMemoryPolicy checks against the host.
func (m Memory) Settings() cm.MemorySettings {
	return cm.MemorySettings{FailSwapOn: m.FailSwapOn, SwapBehavior: m.SwapBehavior, SingleProcessOOMKill: m.SingleProcessOOMKill}
}

func applyMemoryFile(m *Memory, kc *kubeletconfigv1beta1.KubeletConfiguration) {
	if kc.FailSwapOn != nil {
		m.FailSwapOn = *kc.FailSwapOn
	}
	if kc.MemorySwap.SwapBehavior != "" {
		m.SwapBehavior = kc.MemorySwap.SwapBehavior
	}
	if kc.SingleProcessOOMKill != nil {
		m.SingleProcessOOMKill = new(bool)
		*m.SingleProcessOOMKill = *kc.SingleProcessOOMKill
	}
}

// validate refuses, as the kubelet's validation does, a swap behaviour it
// does not know.
func (m Memory) validate() []error {
	switch m.SwapBehavior {
	case "", cm.NoSwap, cm.LimitedSwap:
		return nil
	}
	return []error{fmt.Errorf("memorySwap.swapBehavior: %q: must be one of \"\", %q or %q", m.SwapBehavior, cm.LimitedSwap, cm.NoSwap)}
}

func writeBackMemory(kc *kubeletconfigv1beta1.KubeletConfiguration, m Memory) {
	kc.FailSwapOn = &m.FailSwapOn
	kc.MemorySwap.SwapBehavior = m.SwapBehavior
	kc.SingleProcessOOMKill = m.SingleProcessOOMKill
}
