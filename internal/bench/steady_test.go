package bench

import (
	"slices"
	"testing"
)

// A CRI method's calls are counted over every code containerd answered
// with, for the runtime and image services only, per second of the window.
func TestServedCallsSince(t *testing.T) {
	before, err := parseMetrics([]byte(`# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="ExecSync",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 100
grpc_server_handled_total{grpc_code="DeadlineExceeded",grpc_method="ExecSync",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="ListContainers",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 10
grpc_server_handled_total{grpc_code="OK",grpc_method="Version",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 5
grpc_server_handled_total{grpc_code="OK",grpc_method="List",grpc_service="containerd.services.tasks.v1.Tasks",grpc_type="unary"} 7
`))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseMetrics([]byte(`# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="ExecSync",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 118
grpc_server_handled_total{grpc_code="DeadlineExceeded",grpc_method="ExecSync",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 3
grpc_server_handled_total{grpc_code="OK",grpc_method="ListContainers",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 14
grpc_server_handled_total{grpc_code="OK",grpc_method="Version",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 5
grpc_server_handled_total{grpc_code="OK",grpc_method="ImageFsInfo",grpc_service="runtime.v1.ImageService",grpc_type="unary"} 2
grpc_server_handled_total{grpc_code="OK",grpc_method="List",grpc_service="containerd.services.tasks.v1.Tasks",grpc_type="unary"} 70
`))
	if err != nil {
		t.Fatal(err)
	}
	got := servedCallsSince(before, after, 2)
	want := []CRICalls{{"ExecSync", 10}, {"ListContainers", 2}, {"ImageFsInfo", 1}}
	if !slices.Equal(got, want) {
		t.Errorf("servedCallsSince = %v, want %v", got, want)
	}
}
