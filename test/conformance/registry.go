package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// mirroredRegistry is the registry whose names the local registry serves:
// every image the suite pulls with imagePullPolicy Always is under it.
const mirroredRegistry = "registry.k8s.io"

// Registry is an in-memory registry on 127.0.0.1 holding the run's images
// under their upstream repository paths, which the nodes' containerd reach
// as a mirror of registry.k8s.io: a spec that pulls an image again
// (imagePullPolicy Always) gets the same image it was given at import.
// Names of any other registry (invalid.registry.k8s.io, a spec's own
// localhost:5000) are not mirrored, so their pulls fail or succeed as they
// would upstream.
type Registry struct {
	Addr string // host:port
	srv  *http.Server
	done chan struct{}
}

// StartRegistry serves a registry on 127.0.0.1 and pushes into it every
// tarball's image under each of its tags that names registry.k8s.io.
func StartRegistry(ctx context.Context, tarballs []string) (*Registry, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	r := &Registry{
		Addr: ln.Addr().String(),
		srv: &http.Server{
			Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
			ReadHeaderTimeout: 10 * time.Second,
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // returns when Close is called
	}()
	for _, f := range tarballs {
		if err := r.push(ctx, f); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// push writes the image of one docker-archive tarball under its tags.
func (r *Registry) push(ctx context.Context, file string) error {
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		return fmt.Errorf("registry: %s: %w", file, err)
	}
	img, err := tarball.ImageFromPath(file, nil) // BuildImages writes one image a tarball
	if err != nil {
		return fmt.Errorf("registry: %s: %w", file, err)
	}
	for _, desc := range manifest {
		for _, tag := range desc.RepoTags {
			path, ok := strings.CutPrefix(tag, mirroredRegistry+"/")
			if !ok {
				continue
			}
			ref, err := name.ParseReference(r.Addr+"/"+path, name.Insecure)
			if err != nil {
				return fmt.Errorf("registry: %s: %w", tag, err)
			}
			if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
				return fmt.Errorf("registry: push %s: %w", tag, err)
			}
		}
	}
	return nil
}

// HostsTOML is containerd's hosts.toml for registry.k8s.io that sends pulls
// and resolves to this registry first. The upstream server stays the last
// resort, as on any mirrored node; with no internet it fails as it would.
func (r *Registry) HostsTOML() string {
	return fmt.Sprintf("server = \"https://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
		mirroredRegistry, r.Addr)
}

// WriteMirrorConfig writes HostsTOML into the certs.d of a berth root dir
// (<root>/containerd/certs.d/registry.k8s.io/hosts.toml, containerd's
// config_path as berth configures its managed containerd).
func (r *Registry) WriteMirrorConfig(berthRoot string) error {
	dir := filepath.Join(berthRoot, "containerd", "certs.d", mirroredRegistry)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("registry mirror: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(r.HostsTOML()), 0o644); err != nil {
		return fmt.Errorf("registry mirror: %w", err)
	}
	return nil
}

// Close stops serving and waits for the server to return.
func (r *Registry) Close() error {
	err := r.srv.Close()
	<-r.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
