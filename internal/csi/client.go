package csi

import (
	"context"
	"net"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// nodeConn is the gRPC edge: one driver's node service.
type nodeConn interface {
	NodeGetInfo(ctx context.Context, in *csipb.NodeGetInfoRequest, opts ...grpc.CallOption) (*csipb.NodeGetInfoResponse, error)
	NodeGetCapabilities(ctx context.Context, in *csipb.NodeGetCapabilitiesRequest, opts ...grpc.CallOption) (*csipb.NodeGetCapabilitiesResponse, error)
	NodeStageVolume(ctx context.Context, in *csipb.NodeStageVolumeRequest, opts ...grpc.CallOption) (*csipb.NodeStageVolumeResponse, error)
	NodeUnstageVolume(ctx context.Context, in *csipb.NodeUnstageVolumeRequest, opts ...grpc.CallOption) (*csipb.NodeUnstageVolumeResponse, error)
	NodePublishVolume(ctx context.Context, in *csipb.NodePublishVolumeRequest, opts ...grpc.CallOption) (*csipb.NodePublishVolumeResponse, error)
	NodeUnpublishVolume(ctx context.Context, in *csipb.NodeUnpublishVolumeRequest, opts ...grpc.CallOption) (*csipb.NodeUnpublishVolumeResponse, error)
	NodeGetVolumeStats(ctx context.Context, in *csipb.NodeGetVolumeStatsRequest, opts ...grpc.CallOption) (*csipb.NodeGetVolumeStatsResponse, error)
	Close() error
}

// dialFunc opens a connection to a driver's endpoint. It does not wait for
// the driver: each call does, within its own timeout.
type dialFunc func(endpoint string) (nodeConn, error)

type grpcNode struct {
	csipb.NodeClient
	cc *grpc.ClientConn
}

func (g grpcNode) Close() error { return g.cc.Close() }

// socketPath is the unix socket of an endpoint, which drivers give as a
// path or as unix://path.
func socketPath(endpoint string) string {
	if rest, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		return rest
	}
	return endpoint
}

// dialNode connects lazily to the driver's unix socket; gRPC reconnects by
// itself when the driver restarts on the same socket.
func dialNode(endpoint string) (nodeConn, error) {
	path := socketPath(endpoint)
	cc, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}))
	if err != nil {
		return nil, err
	}
	return grpcNode{NodeClient: csipb.NewNodeClient(cc), cc: cc}, nil
}
