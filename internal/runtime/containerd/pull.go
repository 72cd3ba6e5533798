package containerd

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageClient pulls images into one containerd the way berth pulls the
// images of pods, and shows what is being downloaded meanwhile.
type ImageClient struct {
	c      *client.Client
	images runtimeapi.ImageServiceClient
}

// NewImageClient connects to the containerd at address.
func NewImageClient(address string) (*ImageClient, error) {
	c, err := newClient(address)
	if err != nil {
		return nil, err
	}
	conn, ok := c.Conn().(*grpc.ClientConn)
	if !ok {
		c.Close()
		return nil, errors.New("containerd client has no gRPC connection")
	}
	return &ImageClient{c: c, images: runtimeapi.NewImageServiceClient(conn)}, nil
}

// Close closes the connection.
func (ic *ImageClient) Close() error { return ic.c.Close() }

// Pull pulls image through CRI's image service, the call berth makes for
// a pod's image: the image gets the names, labels and unpacked layers that
// a pod's pull gives it, fetched with the registry configuration of the
// CRI plugin (its hosts directory), anonymously as berth pulls. It returns
// the image's ID.
func (ic *ImageClient) Pull(ctx context.Context, image string) (string, error) {
	resp, err := ic.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return "", fmt.Errorf("pull %s: %w", image, err)
	}
	return resp.GetImageRef(), nil
}

// Download is a blob being written to the content store.
type Download struct {
	Ref    string // containerd's ingest key, such as "layer-sha256:..."
	Offset int64  // bytes written so far
	Total  int64  // the blob's size; 0 while unknown
}

// Downloads lists the blobs being downloaded into CRI's namespace: those
// of every pull under way, whoever started it. A blob is listed only while
// it is written, and is complete once it is gone from the list.
func (ic *ImageClient) Downloads(ctx context.Context) ([]Download, error) {
	ctx = namespaces.WithNamespace(ctx, criNamespace)
	statuses, err := ic.c.ContentStore().ListStatuses(ctx)
	if err != nil {
		return nil, fmt.Errorf("content store downloads: %w", err)
	}
	out := make([]Download, 0, len(statuses))
	for _, st := range statuses {
		out = append(out, Download{Ref: st.Ref, Offset: st.Offset, Total: st.Total})
	}
	return out, nil
}

// Probe checks at once that a containerd answers at address. The
// containerd client would instead wait for a socket that is not there
// until its context ends.
func Probe(ctx context.Context, address string) error {
	if err := probe(ctx, address); err != nil {
		return fmt.Errorf("containerd at %s: %w", address, err)
	}
	return nil
}
