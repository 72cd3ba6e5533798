package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"

	dto "github.com/prometheus/client_model/go"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/imagebuild"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/noderuntime"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

// harnessRuntime is a containerd the harness starts for an agent that does
// not manage its own: the kubelet, and berth on an external runtime
// endpoint. It has berth's bridge conflist under a network name of its own
// and the pause and busybox images imported, so that every agent runs the
// same pods on the same kind of runtime.
type harnessRuntime struct {
	root    string // containerd, its CNI config and IPAM state go below it
	network string // the CNI network's name
	bridge  string
	cidr    string
	binary  string // containerd; "" is containerd from PATH
	binDir  string // holds berth-pause
	busybox string
	// metricsAddress is where the containerd serves its metrics, so that
	// the harness counts the CRI calls it served; "" for nowhere.
	metricsAddress string
}

// start starts the containerd and imports the images; its log goes to
// root/containerd-start.log.
func (h harnessRuntime) start(ctx context.Context) (*containerd.Managed, error) {
	confDir := filepath.Join(h.root, "cni", "net.d")
	err := network.WriteConfList(confDir, network.Bridge{
		Name: h.network, Interface: h.bridge, PodCIDR: h.cidr,
		IPAMDir: filepath.Join(h.root, "cni", "ipam"),
	})
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(h.root, "containerd-start.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	ctrd, err := containerd.Start(ctx, containerd.Options{
		RootDir: h.root, Binary: h.binary, CNIConfDir: confDir,
		SandboxImage: noderuntime.SandboxImage, MetricsAddress: h.metricsAddress,
		Log: slog.New(slog.NewTextHandler(logFile, nil)),
	})
	if err != nil {
		return nil, fmt.Errorf("start the harness's containerd: %w", err)
	}
	if err := h.importImages(ctx, ctrd); err != nil {
		return ctrd, err
	}
	return ctrd, nil
}

func (h harnessRuntime) importImages(ctx context.Context, ctrd *containerd.Managed) error {
	pause, err := imagebuild.PauseImage(filepath.Join(h.binDir, "berth-pause"))
	if err != nil {
		return err
	}
	if err := containerd.ImportImage(ctx, ctrd.Address(), ctrd.Snapshotter(), noderuntime.SandboxImage, pause); err != nil {
		return fmt.Errorf("import the pause image: %w", err)
	}
	busybox, err := imagebuild.BusyboxImage(h.busybox)
	if err != nil {
		return fmt.Errorf("build the busybox image from %s: %w", h.busybox, err)
	}
	if err := containerd.ImportImage(ctx, ctrd.Address(), ctrd.Snapshotter(), busyboxRef, busybox); err != nil {
		return fmt.Errorf("import busybox: %w", err)
	}
	return nil
}

// removeNetwork deletes the bridge and the CNI's cached results of the
// network's pods (kept outside root); call it once the pods are gone.
func (h harnessRuntime) removeNetwork() error {
	_ = exec.Command("ip", "link", "del", h.bridge).Run() // exists only once a bridge pod ran
	rc := cnigc.ResultCache{Dir: cnigc.DefaultResultsDir, Network: h.network, IPAMDir: filepath.Join(h.root, "cni", "ipam")}
	_, err := rc.RemoveOwned()
	return err
}

// localAddress is a free port on the loopback, as host:port.
func localAddress() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// scrapeRuntime reads a harness containerd's metrics at address; nil
// without one (berth's managed containerd serves none).
func scrapeRuntime(ctx context.Context, c *http.Client, address string) (map[string]*dto.MetricFamily, error) {
	if address == "" {
		return nil, nil
	}
	body, err := getBody(ctx, c, "http://"+address+"/v1/metrics")
	if err != nil {
		return nil, fmt.Errorf("containerd's metrics: %w", err)
	}
	return parseMetrics(body)
}
