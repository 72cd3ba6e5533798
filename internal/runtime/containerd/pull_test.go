package containerd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// TestPullAndImportFromTheCLI runs what berth's image commands do against
// a real containerd: a pull through CRI from a registry reached by a
// hosts.toml of the managed containerd, the content store's downloads,
// and an import from a reader with its unpacking hook.
func TestPullAndImportFromTheCLI(t *testing.T) {
	root := testRoot(t)
	m := startManaged(t, root)
	_, is := criClients(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	busybox, err := imagebuild.BusyboxImage("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	host := ln.Addr().String()
	ref := host + "/cli/busybox:v1"
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, busybox); err != nil {
		t.Fatalf("push: %v", err)
	}
	hostsDir := filepath.Join(root, "containerd", "certs.d", host)
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostsToml := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", host, host)
	if err := os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), []byte(hostsToml), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := Probe(ctx, m.Address()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if err := Probe(ctx, filepath.Join(root, "nothing.sock")); err == nil || !strings.Contains(err.Error(), "nothing.sock") {
		t.Errorf("Probe of no socket: %v", err)
	}

	ic, err := NewImageClient(m.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	id, err := ic.Pull(ctx, ref)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	st, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil || st.GetImage().GetId() != id {
		t.Errorf("CRI ImageStatus(%s) = %v, %v; want the image %s", ref, st, err, id)
	}
	if _, err := ic.Pull(ctx, host+"/cli/missing:v1"); err == nil {
		t.Error("pulling a missing image must fail")
	}
	if _, err := ic.Downloads(ctx); err != nil {
		t.Errorf("Downloads: %v", err)
	}

	var archive bytes.Buffer
	const importRef = "berth.local/cli-import:1.0"
	if err := imagebuild.WriteTarball(filepath.Join(root, "import.tar"), importRef, busybox); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "import.tar"))
	if err != nil {
		t.Fatal(err)
	}
	archive.Write(data)
	var unpacked []string
	names, err := ImportArchive(ctx, m.Address(), "", &archive, WithUnpacking(func(image string) { unpacked = append(unpacked, image) }))
	if err != nil || !slices.Equal(names, []string{importRef}) || !slices.Equal(unpacked, []string{importRef}) {
		t.Errorf("ImportArchive = %v, %v; unpacked %v", names, err, unpacked)
	}
}
