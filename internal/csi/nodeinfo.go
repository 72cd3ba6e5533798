package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// NodeIDAnnotation is the Node annotation where the kubelet records each
// driver's node ID (a JSON object, driver name to node ID).
const NodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// ControllerManagedAttachAnnotation on a Node tells the attach-detach
// controller to attach the volumes of the node's pods (it makes their
// VolumeAttachments): the kubelet sets it as it registers the node. berth
// sets it with its first CSI driver, the first that can need an attach.
const ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"

// APINodeInfo is the NodeInfoSink of a cluster node, as the kubelet's
// nodeinfomanager: each registered driver gets an entry in the node's
// CSINode object (made, owned by the Node, when missing), its node ID in
// the Node's csi.volume.kubernetes.io/nodeid annotation and its topology
// in the Node's labels.
type APINodeInfo struct {
	Client   kubernetes.Interface
	NodeName string
	// Retry is the pause between tries after a conflict or an error; a
	// second by default. The caller's context bounds the whole.
	Retry time.Duration

	// mu serializes the read-modify-writes of the two objects, as the
	// kubelet's nodeinfomanager lock.
	mu sync.Mutex
}

// InstallDriver records a driver, retrying until ctx ends.
func (a *APINodeInfo) InstallDriver(ctx context.Context, d storagev1.CSINodeDriver, topology map[string]string) error {
	if err := a.retry(ctx, func(ctx context.Context) error { return a.installOnNode(ctx, d.Name, d.NodeID, topology) }); err != nil {
		return fmt.Errorf("updating Node %s with CSI driver %q: %w", a.NodeName, d.Name, err)
	}
	if err := a.retry(ctx, func(ctx context.Context) error { return a.installOnCSINode(ctx, d) }); err != nil {
		return fmt.Errorf("updating CSINode %s with CSI driver %q: %w", a.NodeName, d.Name, err)
	}
	return nil
}

// UninstallDriver forgets a driver, retrying until ctx ends.
func (a *APINodeInfo) UninstallDriver(ctx context.Context, name string) error {
	if err := a.retry(ctx, func(ctx context.Context) error { return a.uninstallFromCSINode(ctx, name) }); err != nil {
		return fmt.Errorf("removing CSI driver %q from CSINode %s: %w", name, a.NodeName, err)
	}
	if err := a.retry(ctx, func(ctx context.Context) error { return a.uninstallFromNode(ctx, name) }); err != nil {
		return fmt.Errorf("removing CSI driver %q from Node %s: %w", name, a.NodeName, err)
	}
	return nil
}

func (a *APINodeInfo) retry(ctx context.Context, try func(context.Context) error) error {
	pause := a.Retry
	if pause <= 0 {
		pause = time.Second
	}
	var last error
	err := wait.PollUntilContextCancel(ctx, pause, true, func(ctx context.Context) (bool, error) {
		a.mu.Lock()
		last = try(ctx)
		a.mu.Unlock()
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

func (a *APINodeInfo) installOnNode(ctx context.Context, driver, nodeID string, topology map[string]string) error {
	node, err := a.Client.CoreV1().Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ann, annChanged, err := WithNodeID(node.Annotations[NodeIDAnnotation], driver, nodeID)
	if err != nil {
		return err
	}
	labels, err := TopologyLabels(node.Labels, topology)
	if err != nil {
		return err
	}
	annotations := map[string]any{}
	if annChanged {
		annotations[NodeIDAnnotation] = ann
	}
	if node.Annotations[ControllerManagedAttachAnnotation] != "true" {
		annotations[ControllerManagedAttachAnnotation] = "true"
	}
	if len(annotations) == 0 && len(labels) == 0 {
		return nil
	}
	meta := map[string]any{}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	return a.patchNode(ctx, node.UID, meta)
}

func (a *APINodeInfo) uninstallFromNode(ctx context.Context, driver string) error {
	node, err := a.Client.CoreV1().Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ann, changed, err := WithoutNodeID(node.Annotations[NodeIDAnnotation], driver)
	if err != nil || !changed {
		return err
	}
	var v any = ann
	if ann == "" {
		v = nil // a merge patch's null removes the annotation
	}
	return a.patchNode(ctx, node.UID, map[string]any{"annotations": map[string]any{NodeIDAnnotation: v}})
}

// patchNode merge-patches the Node's metadata, guarded by its UID so that a
// Node made anew meanwhile is not patched.
func (a *APINodeInfo) patchNode(ctx context.Context, uid types.UID, meta map[string]any) error {
	meta["uid"] = uid
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = a.Client.CoreV1().Nodes().Patch(ctx, a.NodeName, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (a *APINodeInfo) installOnCSINode(ctx context.Context, d storagev1.CSINodeDriver) error {
	cn, err := a.ownCSINode(ctx)
	if err != nil {
		return err
	}
	drivers, changed := WithDriver(cn.Spec.Drivers, d)
	if !changed {
		return nil
	}
	cn.Spec.Drivers = drivers
	_, err = a.Client.StorageV1().CSINodes().Update(ctx, cn, metav1.UpdateOptions{})
	return err
}

func (a *APINodeInfo) uninstallFromCSINode(ctx context.Context, name string) error {
	cn, err := a.Client.StorageV1().CSINodes().Get(ctx, a.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	drivers := slices.DeleteFunc(slices.Clone(cn.Spec.Drivers), func(d storagev1.CSINodeDriver) bool { return d.Name == name })
	if len(drivers) == len(cn.Spec.Drivers) {
		return nil
	}
	cn.Spec.Drivers = drivers
	_, err = a.Client.StorageV1().CSINodes().Update(ctx, cn, metav1.UpdateOptions{})
	return err
}

// ownCSINode returns the node's CSINode, made if missing. One owned by
// another Node of the same name (an earlier incarnation) is deleted and
// the try fails, so that the next makes it anew, as the kubelet's
// ensureNodeOwnsCSINode.
func (a *APINodeInfo) ownCSINode(ctx context.Context) (*storagev1.CSINode, error) {
	node, err := a.Client.CoreV1().Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cn, err := a.Client.StorageV1().CSINodes().Get(ctx, a.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return a.Client.StorageV1().CSINodes().Create(ctx, NewCSINode(node), metav1.CreateOptions{})
	}
	if err != nil {
		return nil, err
	}
	if !OwnedBy(cn, node) {
		if err := a.Client.StorageV1().CSINodes().Delete(ctx, cn.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting CSINode %s of another node: %w", cn.Name, err)
		}
		return nil, fmt.Errorf("CSINode %s was owned by another node; deleted it", cn.Name)
	}
	return cn, nil
}

// NewCSINode is a Node's empty CSINode, owned by the Node.
func NewCSINode(node *v1.Node) *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
}

// OwnedBy says whether cn is owned by node (name and UID).
func OwnedBy(cn *storagev1.CSINode, node *v1.Node) bool {
	for _, r := range cn.OwnerReferences {
		if r.Kind == "Node" && r.Name == node.Name && r.UID == node.UID {
			return true
		}
	}
	return false
}

// WithDriver puts a driver's entry in a CSINode's list in place of any of
// its name; changed is false when the entry is already there as it is.
func WithDriver(drivers []storagev1.CSINodeDriver, d storagev1.CSINodeDriver) ([]storagev1.CSINodeDriver, bool) {
	out := make([]storagev1.CSINodeDriver, 0, len(drivers)+1)
	changed := true
	for _, cur := range drivers {
		if cur.Name != d.Name {
			out = append(out, cur)
			continue
		}
		if cur.NodeID == d.NodeID && slices.Equal(slices.Sorted(slices.Values(cur.TopologyKeys)), slices.Sorted(slices.Values(d.TopologyKeys))) &&
			sameCount(cur.Allocatable, d.Allocatable) {
			changed = false
		}
	}
	if !changed {
		return drivers, false
	}
	return append(out, d), true
}

func sameCount(a, b *storagev1.VolumeNodeResources) bool {
	ac, bc := a != nil && a.Count != nil, b != nil && b.Count != nil
	if !ac || !bc {
		return ac == bc
	}
	return *a.Count == *b.Count
}

// WithNodeID adds a driver's node ID to the annotation's JSON object.
func WithNodeID(cur, driver, nodeID string) (string, bool, error) {
	ids, err := nodeIDs(cur)
	if err != nil {
		return "", false, err
	}
	if ids[driver] == nodeID {
		return cur, false, nil
	}
	ids[driver] = nodeID
	b, err := json.Marshal(ids)
	return string(b), true, err
}

// WithoutNodeID removes a driver from the annotation's JSON object; ""
// when none is left.
func WithoutNodeID(cur, driver string) (string, bool, error) {
	ids, err := nodeIDs(cur)
	if err != nil {
		return "", false, err
	}
	if _, ok := ids[driver]; !ok {
		return cur, false, nil
	}
	delete(ids, driver)
	if len(ids) == 0 {
		return "", true, nil
	}
	b, err := json.Marshal(ids)
	return string(b), true, err
}

func nodeIDs(ann string) (map[string]string, error) {
	ids := map[string]string{}
	if ann == "" {
		return ids, nil
	}
	if err := json.Unmarshal([]byte(ann), &ids); err != nil {
		return nil, fmt.Errorf("annotation %s %q: %w", NodeIDAnnotation, ann, err)
	}
	return ids, nil
}

// TopologyLabels are the labels to add to the Node for a driver's
// topology; a label the Node has with another value is a collision, as in
// the kubelet.
func TopologyLabels(labels, topology map[string]string) (map[string]string, error) {
	add := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(topology)) {
		v := topology[k]
		cur, ok := labels[k]
		if ok && cur != v {
			return nil, fmt.Errorf("detected topology value collision: driver reported %q:%q but existing label is %q:%q", k, v, k, cur)
		}
		if !ok {
			add[k] = v
		}
	}
	return add, nil
}
