package runtime

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeCRI answers the two stats calls and records what it was asked.
type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	err         error
	gotFilter   *runtimeapi.ContainerStatsFilter
	gotDeadline time.Duration
	gotExec     *runtimeapi.ExecSyncRequest
}

func (f *fakeCRI) deadline(ctx context.Context) {
	if d, ok := ctx.Deadline(); ok {
		f.gotDeadline = time.Until(d)
	}
}

func (f *fakeCRI) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f.deadline(ctx)
	f.gotFilter = req.Filter
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: []*runtimeapi.ContainerStats{{
		Attributes:    &runtimeapi.ContainerAttributes{Id: "c1"},
		WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: &runtimeapi.UInt64Value{Value: 4096}},
	}}}, nil
}

func (f *fakeCRI) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	f.deadline(ctx)
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/images"},
		UsedBytes: &runtimeapi.UInt64Value{Value: 1 << 20},
	}}}, nil
}

// serveFake runs f on an in-memory listener and returns a Service on it.
func serveFake(t *testing.T, f *fakeCRI) *Service {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, f)
	runtimeapi.RegisterImageServiceServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-done
	})
	return &Service{
		conn: conn, callTimeout: DefaultCallTimeout,
		rs: runtimeapi.NewRuntimeServiceClient(conn), is: runtimeapi.NewImageServiceClient(conn),
	}
}

func TestListContainerStats(t *testing.T) {
	f := &fakeCRI{}
	s := serveFake(t, f)
	filter := &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "u1"}}
	stats, err := s.ListContainerStats(context.Background(), filter)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Attributes.Id != "c1" || stats[0].WritableLayer.UsedBytes.Value != 4096 {
		t.Errorf("stats = %v", stats)
	}
	if f.gotFilter.GetLabelSelector()["io.kubernetes.pod.uid"] != "u1" {
		t.Errorf("filter sent = %v", f.gotFilter)
	}
	if f.gotDeadline <= 0 || f.gotDeadline > ListTimeout {
		t.Errorf("call deadline %v, want within ListTimeout (%v)", f.gotDeadline, ListTimeout)
	}
}

func TestImageFsInfo(t *testing.T) {
	f := &fakeCRI{}
	s := serveFake(t, f)
	resp, err := s.ImageFsInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fs := resp.GetImageFilesystems()
	if len(fs) != 1 || fs[0].GetFsId().GetMountpoint() != "/var/lib/images" || fs[0].GetUsedBytes().GetValue() != 1<<20 {
		t.Errorf("image filesystems = %v", fs)
	}
	if f.gotDeadline <= 0 || f.gotDeadline > ListTimeout {
		t.Errorf("call deadline %v, want within ListTimeout (%v)", f.gotDeadline, ListTimeout)
	}
}

func TestStatsErrorsKeepTheirCode(t *testing.T) {
	f := &fakeCRI{err: status.Error(codes.Unimplemented, "not here")}
	s := serveFake(t, f)
	_, err := s.ListContainerStats(context.Background(), nil)
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("ListContainerStats error %v: code %v, want Unimplemented", err, status.Code(err))
	}
	_, err = s.ImageFsInfo(context.Background())
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("ImageFsInfo error %v: code %v, want Unimplemented", err, status.Code(err))
	}
}
