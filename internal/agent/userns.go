package agent

import (
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/lifecycle"
	"github.com/berth-dev/berth/internal/userns"
)

// User namespace set-up problems, as node events.
const (
	reasonUserNamespacesUnavailable = "UserNamespacesUnavailable"
	reasonUserNamespaceFileCorrupt  = "UserNamespaceMappingsCorrupt"
)

// buildUserNamespaces takes whether the runtime can give pods user
// namespaces (node, from its CRI status' runtime handlers), reads the
// node's ID range (/etc/subuid and /etc/subgid for user "kubelet", else
// the kubelet's default), and restores the ranges of the pods under the root dir. Where
// either fails, pods of hostUsers: false are refused at admission with
// why; the rest of berth runs on.
func (p *parts) buildUserNamespaces(node lifecycle.NodeFeatures) (*userns.Manager, lifecycle.NodeFeatures) {
	why := node.UserNamespacesWhy
	idsPerPod := uint32(p.cfg.UserNamespacesIDsPerPod) // validated: a multiple of 65536 within uint32
	first, length, err := userns.NodeRange("/etc/subuid", "/etc/subgid", idsPerPod)
	var alloc *userns.Allocator
	if err == nil {
		alloc, err = userns.NewAllocator(first, length, idsPerPod, int(p.cfg.MaxPods))
	}
	if err != nil {
		why = fmt.Sprintf("the node's user namespace range: %v", err)
		p.recorder.NodeEvent(v1.EventTypeWarning, reasonUserNamespacesUnavailable, why)
		p.log.Error("user namespaces are unavailable", "err", err)
		// An allocator over the default range, so that the ranges on disk
		// are still known and released; nothing new is allocated.
		first, length = userns.DefaultRange(idsPerPod)
		alloc, _ = userns.NewAllocator(first, length, idsPerPod, 0)
	}
	m, problems := userns.Open(filepath.Join(p.cfg.RootDir, "pods"), alloc, why, p.log.With("component", "userns"))
	for _, pr := range problems {
		p.log.Error("a pod's user namespace mappings cannot be restored", "err", pr)
		p.recorder.NodeEvent(v1.EventTypeWarning, reasonUserNamespaceFileCorrupt, pr.Error())
	}
	if why != "" {
		p.log.Info("pods of hostUsers: false will be refused", "why", why)
	}
	node.UserNamespaces, node.UserNamespacesWhy = why == "", why
	return m, node
}
