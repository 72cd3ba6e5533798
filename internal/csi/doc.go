// Package csi is the node side of the Container Storage Interface, as the
// kubelet's kubernetes.io/csi volume plugin: it takes the CSI drivers that
// the plugin manager registers (Handler: NodeGetInfo, NodeGetCapabilities,
// a CSINode driver entry), and runs the node operations the volume manager
// asks for (Stage, Publish, Unpublish, Unstage, Stats) with the kubelet's
// paths and vol_data.json files under the root dir:
//
//	plugins/kubernetes.io/csi/<driver>/<sha256(volume handle)>/globalmount  staging target
//	plugins/kubernetes.io/csi/<driver>/<sha256(volume handle)>/vol_data.json
//	pods/<uid>/volumes/kubernetes.io~csi/<volume name>/mount                publish target
//	pods/<uid>/volumes/kubernetes.io~csi/<volume name>/vol_data.json
//
// Reconstruct lists those files after a restart so the volume manager can
// tell the mounts it finds from the mounts it must make.
//
// What to call, given what is on disk and what the driver can do, is decided
// by pure functions over plain data (decide.go); the gRPC calls (client.go),
// the mount table and the files (disk.go) are edges behind narrow
// interfaces. berth never mounts anything here itself: the drivers mount.
package csi
