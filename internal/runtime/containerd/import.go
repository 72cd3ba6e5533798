package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

const (
	// The label the CRI plugin puts on the images it pulls; imports carry
	// it too, so they look the same as pulled images to CRI.
	criImageLabelKey   = "io.cri-containerd.image"
	criImageLabelValue = "managed"

	// criVisibleTimeout bounds the wait for CRI to see an imported image:
	// containerd 1.6's CRI plugin learns about images from the image
	// events, a moment after the import itself returns.
	criVisibleTimeout = 10 * time.Second
	criPollInterval   = 10 * time.Millisecond
)

// ImportFile imports a docker-archive or OCI-layout tarball (plain, gzip or
// zstd) into the CRI namespace and unpacks it for snapshotter (""
// means the one containerd's CRI plugin uses), so CRI can run it at once.
// It returns the names of the images imported. OCI images are named by
// their org.opencontainers.image.ref.name annotation when it is a full
// reference ("registry/repo:tag"); bare tags are ignored.
func ImportFile(ctx context.Context, address, snapshotter, path string, opts ...ImportOption) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	names, err := ImportArchive(ctx, address, snapshotter, f, opts...)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return names, nil
}

// ImportArchive is ImportFile for an archive read from r, for a caller
// that wants to watch the reading (a progress display counts the bytes).
func ImportArchive(ctx context.Context, address, snapshotter string, r io.Reader, opts ...ImportOption) ([]string, error) {
	var o importOptions
	for _, opt := range opts {
		opt(&o)
	}
	dr, err := compression.DecompressStream(r)
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	return importStream(ctx, address, snapshotter, dr, o)
}

// ImportOption adjusts an import.
type ImportOption func(*importOptions)

type importOptions struct {
	unpacking func(image string)
}

// WithUnpacking calls fn before each image is unpacked: the archive has
// been read by then, and unpacking a large image takes a while.
func WithUnpacking(fn func(image string)) ImportOption {
	return func(o *importOptions) { o.unpacking = fn }
}

// ImportDir imports every *.tar, *.tar.gz and *.tgz file in dir, in name
// order. A missing dir means nothing to import. One bad file does not stop
// the others: each failure is in errs, naming its file.
func ImportDir(ctx context.Context, address, snapshotter, dir string, log *slog.Logger) (imported []string, errs []error) {
	if log == nil {
		log = slog.Default()
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("import: %w", err)}
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if !isImageArchive(e.Name()) {
			continue
		}
		// Follows symlinks: image dirs often link to a shared store.
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue
		}
		names, err := ImportFile(ctx, address, snapshotter, path)
		if err != nil {
			log.Warn("image import failed", "file", path, "err", err)
			errs = append(errs, err)
			continue
		}
		log.Info("imported images", "file", path, "images", names)
		imported = append(imported, names...)
	}
	return imported, errs
}

func isImageArchive(file string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(file, ext) {
			return true
		}
	}
	return false
}

// ImportImage imports an in-memory image under ref (the pause image at
// start): it streams a docker archive of img into containerd.
func ImportImage(ctx context.Context, address, snapshotter, ref string, img ggcrv1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	pr, pw := io.Pipe()
	written := make(chan struct{})
	go func() {
		defer close(written)
		pw.CloseWithError(tarball.Write(tag, img, pw))
	}()
	names, err := importStream(ctx, address, snapshotter, pr, importOptions{})
	// Unblock the writer if the import stopped reading early.
	pr.CloseWithError(errors.New("import ended"))
	<-written
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	want, err := reference.ParseDockerRef(ref)
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	if !slices.Contains(names, want.String()) {
		return fmt.Errorf("import %s: containerd named the image %v", ref, names)
	}
	return nil
}

// importStream imports the archive in r, unpacks its images and waits until
// CRI sees them.
func importStream(ctx context.Context, address, snapshotter string, r io.Reader, o importOptions) ([]string, error) {
	c, err := newClient(address)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, criNamespace)
	// The lease keeps the garbage collector off the new content until the
	// images that reference it exist and are unpacked.
	ctx, done, err := c.WithLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	defer done(context.WithoutCancel(ctx))
	if snapshotter == "" {
		if snapshotter, err = criSnapshotterOf(ctx, c); err != nil {
			return nil, err
		}
	}

	imgs, err := c.Import(ctx, r,
		client.WithImageRefTranslator(fullReference),
		client.WithImageLabels(map[string]string{criImageLabelKey: criImageLabelValue}),
	)
	if err != nil {
		return nil, err
	}
	if len(imgs) == 0 {
		return nil, errors.New("the archive holds no image with a full reference for a name")
	}
	var names []string
	unpacked := map[string]bool{}
	for _, img := range imgs {
		names = append(names, img.Name)
		if unpacked[img.Target.Digest.String()] {
			continue
		}
		if o.unpacking != nil {
			o.unpacking(img.Name)
		}
		image := client.NewImageWithPlatform(c, img, platforms.DefaultStrict())
		if err := image.Unpack(ctx, snapshotter); err != nil {
			return nil, fmt.Errorf("unpack %s for %s: %w", img.Name, snapshotter, err)
		}
		unpacked[img.Target.Digest.String()] = true
	}
	conn, ok := c.Conn().(*grpc.ClientConn)
	if !ok {
		return nil, errors.New("containerd client has no gRPC connection")
	}
	if err := waitCRISees(ctx, clock.RealClock{}, runtimeapi.NewImageServiceClient(conn), names); err != nil {
		return nil, err
	}
	return names, nil
}

// fullReference names an OCI image from its ref.name annotation when that
// is a whole reference; a bare tag such as "latest" says nothing of the
// repository, so the image stays unnamed.
func fullReference(refName string) string {
	if !strings.ContainsAny(refName, "/:@") {
		return ""
	}
	ref, err := reference.ParseDockerRef(refName)
	if err != nil {
		return ""
	}
	return ref.String()
}

// waitCRISees polls CRI's ImageStatus until it reports every name.
func waitCRISees(ctx context.Context, clk clock.WithTicker, images runtimeapi.ImageServiceClient, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, criVisibleTimeout)
	defer cancel()
	ticker := clk.NewTicker(criPollInterval)
	defer ticker.Stop()
	for _, n := range names {
		for {
			resp, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: n}})
			if err != nil {
				return fmt.Errorf("CRI image status of %s: %w", n, err)
			}
			if resp.GetImage() != nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRI does not see imported image %s: %w", n, ctx.Err())
			case <-ticker.C():
			}
		}
	}
	return nil
}
