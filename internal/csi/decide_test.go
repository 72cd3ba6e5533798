package csi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

func TestValidateVersions(t *testing.T) {
	v1_5 := version.MustParseGeneric("1.5.0")
	for _, tc := range []struct {
		versions   []string
		registered *version.Version
		want       string // "" for an error
		errHas     []string
	}{
		{versions: []string{"1.0.0"}, want: "1.0.0"},
		{versions: []string{"0.3.0", "1.2.0", "1.10.0"}, want: "1.10.0"},
		{versions: []string{"1.0.0", "2.0.0"}, want: "1.0.0"},
		{versions: []string{"v1.9.0"}, want: "1.9.0"},
		{versions: nil, errHas: []string{"offers no versions", "1.x"}},
		{versions: []string{"0.3.0"}, errHas: []string{"0.3.0", "1.x"}},
		{versions: []string{"2.0.0", "3.0.0"}, errHas: []string{"2.0.0", "3.0.0"}},
		{versions: []string{"banana"}, errHas: []string{"banana"}},
		{versions: []string{"1.5.0"}, registered: v1_5, errHas: []string{"already registered", "1.5.0"}},
		{versions: []string{"1.2.0"}, registered: v1_5, errHas: []string{"already registered"}},
		{versions: []string{"1.6.0"}, registered: v1_5, want: "1.6.0"},
	} {
		t.Run(fmt.Sprint(tc.versions, tc.registered), func(t *testing.T) {
			got, err := validateVersions("d.csi.test", tc.versions, tc.registered)
			if tc.want != "" {
				if err != nil || got.String() != tc.want {
					t.Fatalf("= %v, %v; want %s", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("= %v, want an error", got)
			}
			for _, s := range append(tc.errHas, "d.csi.test") {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestCSIAccessMode(t *testing.T) {
	for _, tc := range []struct {
		mode v1.PersistentVolumeAccessMode
		snmw bool
		want csipb.VolumeCapability_AccessMode_Mode
	}{
		{v1.ReadWriteOnce, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{v1.ReadWriteOnce, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{v1.ReadWriteOncePod, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{v1.ReadWriteOncePod, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{v1.ReadOnlyMany, false, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{v1.ReadOnlyMany, true, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{v1.ReadWriteMany, true, csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		{"Bogus", false, csipb.VolumeCapability_AccessMode_UNKNOWN},
	} {
		if got := csiAccessMode(tc.mode, tc.snmw); got != tc.want {
			t.Errorf("csiAccessMode(%s, %v) = %v, want %v", tc.mode, tc.snmw, got, tc.want)
		}
	}
}

func TestVolumeCapability(t *testing.T) {
	vc := volumeCapability("", Capabilities{}, "xfs", []string{"noatime"}, "42")
	m := vc.GetMount()
	if vc.GetAccessMode().GetMode() != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER ||
		m.GetFsType() != "xfs" || strings.Join(m.GetMountFlags(), ",") != "noatime" || m.GetVolumeMountGroup() != "42" {
		t.Errorf("mount capability = %v", vc)
	}
	if vc := volumeCapability(v1.ReadWriteMany, Capabilities{}, "block", nil, ""); vc.GetBlock() == nil || vc.GetMount() != nil {
		t.Errorf("block capability = %v", vc)
	}
	if got := withSELinux([]string{"ro"}, "system_u:object_r:container_file_t:s0:c1,c2"); strings.Join(got, " ") !=
		`ro context="system_u:object_r:container_file_t:s0:c1,c2"` {
		t.Errorf("withSELinux = %q", got)
	}
	if got := withSELinux([]string{"ro"}, ""); len(got) != 1 {
		t.Errorf("withSELinux without label = %q", got)
	}
}

func TestCapabilitiesFrom(t *testing.T) {
	var caps []*csipb.NodeServiceCapability
	for _, c := range []csipb.NodeServiceCapability_RPC_Type{rpcStage, rpcStats, rpcGroup, rpcSNMW,
		csipb.NodeServiceCapability_RPC_EXPAND_VOLUME, csipb.NodeServiceCapability_RPC_VOLUME_CONDITION, csipb.NodeServiceCapability_RPC_UNKNOWN} {
		caps = append(caps, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}}})
	}
	caps = append(caps, nil, &csipb.NodeServiceCapability{})
	want := Capabilities{StageUnstage: true, VolumeStats: true, ExpandVolume: true, VolumeCondition: true, SingleNodeMultiWriter: true, VolumeMountGroup: true}
	if got := capabilitiesFrom(caps); got != want {
		t.Errorf("= %+v, want %+v", got, want)
	}
	if got := capabilitiesFrom(nil); got != (Capabilities{}) {
		t.Errorf("no capabilities = %+v", got)
	}
}

func TestPublishVolumeContext(t *testing.T) {
	pod := PodInfo{Name: "p", Namespace: "ns", UID: "u", ServiceAccountName: "sa"}
	attrs := map[string]string{"a": "1", ctxPodName: "spoofed"}
	if got := publishVolumeContext(attrs, false, pod, false); !mapsEqual(got, attrs) {
		t.Errorf("without podInfoOnMount = %v", got)
	}
	got := publishVolumeContext(attrs, true, pod, true)
	want := map[string]string{"a": "1", ctxPodName: "p", ctxPodNamespace: "ns", ctxPodUID: "u", ctxServiceAccountName: "sa", ctxEphemeral: "true"}
	if !mapsEqual(got, want) {
		t.Errorf("with podInfoOnMount = %v, want %v", got, want)
	}
	if attrs[ctxPodName] != "spoofed" || len(attrs) != 2 {
		t.Errorf("the volume's attributes were changed: %v", attrs)
	}
	if got := publishVolumeContext(nil, true, pod, false); got[ctxEphemeral] != "false" || len(got) != 5 {
		t.Errorf("no attributes, podInfoOnMount = %v", got)
	}
}

func TestFSGroupPlan(t *testing.T) {
	gid := int64(1000)
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	for _, tc := range []struct {
		name       string
		in         fsGroupInput
		mountGroup string
		caller     bool
	}{
		{"no fsGroup", fsGroupInput{FSType: "ext4", AccessModes: rwo}, "", false},
		{"driver applies", fsGroupInput{FSGroup: &gid, DriverMountGroup: true, Policy: storagev1.NoneFSGroupPolicy}, "1000", false},
		{"default policy rwo", fsGroupInput{FSGroup: &gid, FSType: "ext4", AccessModes: rwo}, "", true},
		{"default policy rwop", fsGroupInput{FSGroup: &gid, FSType: "ext4", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}}, "", true},
		{"default policy rwx", fsGroupInput{FSGroup: &gid, FSType: "ext4", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}}, "", false},
		{"default policy no fsType", fsGroupInput{FSGroup: &gid, AccessModes: rwo}, "", false},
		{"default policy no access modes", fsGroupInput{FSGroup: &gid, FSType: "ext4"}, "", false},
		{"default policy inline", fsGroupInput{FSGroup: &gid, FSType: "ext4", Ephemeral: true}, "", true},
		{"explicit default policy", fsGroupInput{FSGroup: &gid, FSType: "ext4", AccessModes: rwo, Policy: storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}, "", true},
		{"file policy", fsGroupInput{FSGroup: &gid, Policy: storagev1.FileFSGroupPolicy, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}}, "", true},
		{"none policy", fsGroupInput{FSGroup: &gid, Policy: storagev1.NoneFSGroupPolicy, FSType: "ext4", AccessModes: rwo}, "", false},
		{"read-only", fsGroupInput{FSGroup: &gid, Policy: storagev1.FileFSGroupPolicy, ReadOnly: true}, "", false},
	} {
		mg, caller := fsGroupPlan(tc.in)
		if mg != tc.mountGroup || caller != tc.caller {
			t.Errorf("%s: = %q, %v; want %q, %v", tc.name, mg, caller, tc.mountGroup, tc.caller)
		}
	}
}

func TestPlanSetUp(t *testing.T) {
	mine := &VolData{DriverName: "d", VolumeHandle: "h"}
	other := &VolData{DriverName: "d", VolumeHandle: "other"}
	corrupt := errors.New("volume data file x: truncated")
	for _, tc := range []struct {
		name   string
		t      target
		want   step
		errHas string
	}{
		{"nothing there", target{}, stepCall, ""},
		{"record, not mounted", target{DirExists: true, Data: mine}, stepCall, ""},
		{"corrupt, not mounted", target{DirExists: true, DataErr: corrupt}, stepCall, ""},
		{"other record, not mounted", target{DirExists: true, Data: other}, stepCall, ""},
		{"mounted and recorded", target{DirExists: true, Data: mine, Mounted: true}, stepNone, ""},
		{"mounted, other volume", target{DirExists: true, Data: other, Mounted: true}, stepNone, `volume "other"`},
		{"mounted, corrupt record", target{DirExists: true, DataErr: corrupt, Mounted: true}, stepNone, "truncated"},
		{"mounted, no record", target{DirExists: true, Mounted: true}, stepNone, "no vol_data.json"},
	} {
		got, err := planSetUp(tc.t, "d", "h")
		if got != tc.want || (err == nil) != (tc.errHas == "") || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("%s: = %v, %v; want %v, error with %q", tc.name, got, err, tc.want, tc.errHas)
		}
	}
}

func TestPlanTearDown(t *testing.T) {
	rec := &VolData{DriverName: "d", VolumeHandle: "h"}
	corrupt := errors.New("volume data file x: truncated")
	for _, tc := range []struct {
		name       string
		t          target
		withDriver bool
		want       step
		errHas     string
	}{
		{"nothing there", target{}, true, stepNone, ""},
		{"record", target{DirExists: true, Data: rec}, true, stepCall, ""},
		{"record, mounted", target{DirExists: true, Data: rec, Mounted: true}, true, stepCall, ""},
		{"record, driver does not stage", target{DirExists: true, Data: rec}, false, stepCleanup, ""},
		{"record, mounted, driver does not stage", target{DirExists: true, Data: rec, Mounted: true}, false, stepNone, "no NodeUnstageVolume"},
		{"leftover dir", target{DirExists: true}, true, stepCleanup, ""},
		{"corrupt, not mounted", target{DirExists: true, DataErr: corrupt}, true, stepCleanup, ""},
		{"corrupt, mounted", target{DirExists: true, DataErr: corrupt, Mounted: true}, true, stepNone, "truncated"},
		{"no record, mounted", target{DirExists: true, Mounted: true}, true, stepNone, "which driver"},
	} {
		got, err := planTearDown(tc.t, tc.withDriver)
		if got != tc.want || (err == nil) != (tc.errHas == "") || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("%s: = %v, %v; want %v, error with %q", tc.name, got, err, tc.want, tc.errHas)
		}
	}
}

func TestFinalError(t *testing.T) {
	for _, tc := range []struct {
		err   error
		final bool
	}{
		{status.Error(codes.Internal, "x"), true},
		{status.Error(codes.InvalidArgument, "x"), true},
		{status.Error(codes.NotFound, "x"), true},
		{fmt.Errorf("wrapped: %w", status.Error(codes.FailedPrecondition, "x")), true},
		{status.Error(codes.DeadlineExceeded, "x"), false},
		{status.Error(codes.Canceled, "x"), false},
		{status.Error(codes.Unavailable, "x"), false},
		{status.Error(codes.ResourceExhausted, "x"), false},
		{status.Error(codes.Aborted, "x"), false},
		{context.DeadlineExceeded, false},
		{errors.New("not gRPC"), false},
	} {
		if got := finalError(tc.err); got != tc.final {
			t.Errorf("finalError(%v) = %v, want %v", tc.err, got, tc.final)
		}
	}
}

func TestStatsFrom(t *testing.T) {
	usage := []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 100, Used: 40, Available: 60},
		{Unit: csipb.VolumeUsage_INODES, Total: 10, Used: 1, Available: 9},
		{Unit: csipb.VolumeUsage_UNKNOWN, Total: 7},
		nil,
	}
	st, err := statsFrom(&csipb.NodeGetVolumeStatsResponse{Usage: usage}, false)
	if err != nil || st.CapacityBytes != 100 || st.UsedBytes != 40 || st.AvailableBytes != 60 ||
		st.Inodes != 10 || st.InodesUsed != 1 || st.InodesFree != 9 || st.Abnormal != nil {
		t.Errorf("= %+v, %v", st, err)
	}
	if _, err := statsFrom(&csipb.NodeGetVolumeStatsResponse{}, false); err == nil {
		t.Error("no usage accepted")
	}
	cond := &csipb.VolumeCondition{Abnormal: true, Message: "read-only remount"}
	st, err = statsFrom(&csipb.NodeGetVolumeStatsResponse{VolumeCondition: cond}, true)
	if err != nil || st.Abnormal == nil || !*st.Abnormal || st.Message != "read-only remount" {
		t.Errorf("condition only = %+v, %v", st, err)
	}
	if st, _ := statsFrom(&csipb.NodeGetVolumeStatsResponse{Usage: usage, VolumeCondition: cond}, false); st.Abnormal != nil {
		t.Error("condition read from a driver without VOLUME_CONDITION")
	}
}

func TestCSINodeDriver(t *testing.T) {
	e := csiNodeDriver(Driver{Name: "d", NodeID: "n1", MaxVolumes: 0, Topology: map[string]string{"b": "2", "a": "1"}})
	if e.Name != "d" || e.NodeID != "n1" || e.Allocatable != nil || strings.Join(e.TopologyKeys, ",") != "a,b" {
		t.Errorf("= %+v", e)
	}
	e = csiNodeDriver(Driver{Name: "d", NodeID: "n1", MaxVolumes: 1 << 40})
	if e.Allocatable == nil || *e.Allocatable.Count != 1<<31-1 || len(e.TopologyKeys) != 0 {
		t.Errorf("large max volumes = %+v", e)
	}
}
