package agent

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/lifecycle"
	"github.com/berth-dev/berth/internal/nodestatus"
	"github.com/berth-dev/berth/internal/userns"
)

// runtimeFeatures is what the runtime says it can do, read once from its
// CRI status as berth starts: what admission allows (user namespaces) and
// what the Node reports (status.runtimeHandlers, status.features: admission
// reads supplementalGroupsPolicy from there, as the kubelet's does). The kubelet reads them at
// every status update; a runtime's handlers do not change while it runs,
// and berth's managed runtime restarts from the same binary.
type runtimeFeatures struct {
	admission lifecycle.NodeFeatures
	node      nodestatus.RuntimeFeatures
}

// readRuntimeFeatures reads the runtime's CRI status. Where it cannot be
// read, the runtime is taken to lack every optional feature, with why.
// stateDir is the managed runtime's state directory ("" for an external
// runtime), which pods in user namespaces must be able to reach.
func readRuntimeFeatures(ctx context.Context, cri runtimeapi.RuntimeServiceClient, rt lifecycle.RuntimeInfo, stateDir string) runtimeFeatures {
	ctx, cancel := context.WithTimeout(ctx, readyStatusTimeout)
	defer cancel()
	f := runtimeFeatures{admission: lifecycle.NodeFeatures{Runtime: rt}}
	resp, err := cri.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		f.admission.UserNamespacesWhy = fmt.Sprintf("the runtime's status could not be read when berth started: %v", err)
		return f
	}
	f.admission.UserNamespacesWhy = userns.HandlerSupport(resp, "")
	if f.admission.UserNamespacesWhy == "" {
		f.admission.UserNamespacesWhy = userns.ReachableFromUserNamespace(stateDir)
	}
	f.admission.UserNamespaces = f.admission.UserNamespacesWhy == ""
	f.node = nodestatus.RuntimeFeaturesOf(resp)
	return f
}
