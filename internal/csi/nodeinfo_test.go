package csi

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var _ NodeInfoSink = (*APINodeInfo)(nil)

func TestWithNodeID(t *testing.T) {
	got, changed, err := WithNodeID("", "a", "n1")
	if err != nil || !changed || got != `{"a":"n1"}` {
		t.Fatalf("got %q %v %v", got, changed, err)
	}
	got, changed, _ = WithNodeID(got, "b", "n2")
	if !changed || got != `{"a":"n1","b":"n2"}` {
		t.Fatalf("got %q", got)
	}
	if _, changed, _ := WithNodeID(got, "a", "n1"); changed {
		t.Error("the same ID changed the annotation")
	}
	got, changed, _ = WithoutNodeID(got, "a")
	if !changed || got != `{"b":"n2"}` {
		t.Fatalf("got %q", got)
	}
	if got, changed, _ = WithoutNodeID(got, "b"); !changed || got != "" {
		t.Fatalf("got %q", got)
	}
	if _, changed, _ := WithoutNodeID(`{"b":"n2"}`, "a"); changed {
		t.Error("removing an absent driver changed the annotation")
	}
	if _, _, err := WithNodeID("{bad", "a", "n1"); err == nil {
		t.Error("a corrupt annotation passed")
	}
}

func TestTopologyLabels(t *testing.T) {
	add, err := TopologyLabels(map[string]string{"zone": "z1", "other": "x"}, map[string]string{"zone": "z1", "topology.hostpath.csi/node": "n"})
	if err != nil || !reflect.DeepEqual(add, map[string]string{"topology.hostpath.csi/node": "n"}) {
		t.Fatalf("got %v, %v", add, err)
	}
	if _, err := TopologyLabels(map[string]string{"zone": "z1"}, map[string]string{"zone": "z2"}); !errIs(err, "topology value collision") {
		t.Errorf("got %v", err)
	}
}

func TestWithDriver(t *testing.T) {
	d := storagev1.CSINodeDriver{Name: "a", NodeID: "n", TopologyKeys: []string{"k"}, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](3)}}
	list, changed := WithDriver(nil, d)
	if !changed || len(list) != 1 {
		t.Fatal(list)
	}
	if _, changed := WithDriver(list, d); changed {
		t.Error("the same entry changed the list")
	}
	d2 := d
	d2.Allocatable = nil
	list2, changed := WithDriver(append(list, storagev1.CSINodeDriver{Name: "b"}), d2)
	if !changed || len(list2) != 2 || list2[1].Name != "a" || list2[1].Allocatable != nil {
		t.Errorf("got %+v", list2)
	}
}

func testNodeObj() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid", Labels: map[string]string{"kubernetes.io/hostname": testNode}}}
}

func TestAPINodeInfo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A CSINode left by an earlier Node of the same name is replaced.
	stale := NewCSINode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "old-uid"}})
	client := fake.NewClientset(testNodeObj(), stale)
	a := &APINodeInfo{Client: client, NodeName: testNode, Retry: time.Millisecond}
	d := csiNodeDriver(Driver{Name: "hostpath.csi.k8s.io", NodeID: testNode, MaxVolumes: 10, Topology: map[string]string{"topology.hostpath.csi/node": testNode}})
	if err := a.InstallDriver(ctx, d, map[string]string{"topology.hostpath.csi/node": testNode}); err != nil {
		t.Fatal(err)
	}
	cn, err := client.StorageV1().CSINodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !OwnedBy(cn, testNodeObj()) || len(cn.Spec.Drivers) != 1 || !reflect.DeepEqual(cn.Spec.Drivers[0], d) {
		t.Errorf("CSINode: %+v", cn)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if node.Annotations[NodeIDAnnotation] != `{"hostpath.csi.k8s.io":"node-a"}` || node.Annotations[ControllerManagedAttachAnnotation] != "true" ||
		node.Labels["topology.hostpath.csi/node"] != testNode ||
		node.Labels["kubernetes.io/hostname"] != testNode {
		t.Errorf("Node: %v %v", node.Annotations, node.Labels)
	}

	if err := a.UninstallDriver(ctx, d.Name); err != nil {
		t.Fatal(err)
	}
	cn, _ = client.StorageV1().CSINodes().Get(ctx, testNode, metav1.GetOptions{})
	if len(cn.Spec.Drivers) != 0 {
		t.Errorf("CSINode after uninstall: %+v", cn.Spec.Drivers)
	}
	node, _ = client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if _, ok := node.Annotations[NodeIDAnnotation]; ok {
		t.Errorf("annotation left: %v", node.Annotations)
	}
}

func TestAPINodeInfoGivesUpWithContext(t *testing.T) {
	// No Node: every try fails until the context ends, and the error says
	// why.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a := &APINodeInfo{Client: fake.NewClientset(), NodeName: testNode, Retry: time.Millisecond}
	err := a.InstallDriver(ctx, storagev1.CSINodeDriver{Name: "d", NodeID: "n"}, nil)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("got %v", err)
	}
}
