// A CSI driver for the cluster-mode tests that really mounts storage: each
// volume is a directory under its --state-dir, bind-mounted at the staging
// and target paths. Upstream's host path driver is not served by the module
// proxy this project reaches; this is the project's own, smaller one.
module github.com/berth-dev/berth/test/cluster/tools/csi-hostpath-driver

go 1.26.0

require (
	github.com/berth-dev/berth/test/cluster/tools/csi-registrar v0.0.0
	github.com/container-storage-interface/spec v1.9.0
	golang.org/x/sys v0.40.0
	google.golang.org/grpc v1.79.3
	k8s.io/klog/v2 v2.140.0
)

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	golang.org/x/net v0.49.0 // indirect
	golang.org/x/text v0.33.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260128011058-8636f8732409 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	k8s.io/kubelet v0.36.3 // indirect
)

// The registration socket's server, shared with csi-mock-driver.
replace github.com/berth-dev/berth/test/cluster/tools/csi-registrar => ../csi-registrar
