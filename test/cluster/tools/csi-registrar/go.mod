// What node-driver-registrar does for a CSI driver, for the cluster-mode
// tests' own CSI drivers (csi-mock-driver, csi-hostpath-driver), which use
// it through a replace directive: node-driver-registrar is not served by
// the module proxy this project reaches.
module github.com/berth-dev/berth/test/cluster/tools/csi-registrar

go 1.26.0

require (
	google.golang.org/grpc v1.79.3
	k8s.io/klog/v2 v2.140.0
	k8s.io/kubelet v0.36.3
)

require (
	github.com/go-logr/logr v1.4.3 // indirect
	golang.org/x/net v0.49.0 // indirect
	golang.org/x/sys v0.40.0 // indirect
	golang.org/x/text v0.33.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260128011058-8636f8732409 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
)
