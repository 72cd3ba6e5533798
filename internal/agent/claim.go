package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/adminapi"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/podsource"
	"github.com/berth-dev/berth/internal/server"
)

// claimed is what berth takes before it starts anything: the API ports
// and the admin socket (one in use means another berth or another server
// runs here, and must stop berth at once), the applied pods' store, the
// metrics registry and the API server's connection. release gives back
// the listeners and the socket, at the very end of a shutdown.
type claimed struct {
	api, secure net.Listener // nil when not served
	admin       net.Listener
	registry    *prometheus.Registry
	cluster     *clusterNode       // nil standalone
	secureAuth  *server.SecureAuth // nil without the secure API
	store       *podsource.Store
}

// claim takes, in order: the API ports, the root and log directories, the
// cluster connection and the secure API's credentials, the admin socket,
// and the store (whose pods are read now, before anything starts). What it
// took is given back when it fails.
func claim(ctx context.Context, cfg *config.Config, log *slog.Logger) (_ *claimed, err error) {
	c := &claimed{}
	defer func() {
		if err != nil {
			c.release()
		}
	}()
	if c.api, err = listen(cfg.Address, cfg.ReadOnlyPort); err != nil {
		return nil, fmt.Errorf("local API: %w", err)
	}
	if c.secure, err = listen(cfg.Address, cfg.Serving.Port); err != nil {
		return nil, fmt.Errorf("secure API: %w", err)
	}
	for _, dir := range []string{cfg.RootDir, cfg.PodLogsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	c.registry = prometheus.NewRegistry()
	c.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if c.cluster, err = newClusterNode(cfg, c.registry, log); err != nil {
		return nil, err
	}
	if c.secure != nil {
		var client kubernetes.Interface // never a typed nil
		if c.cluster != nil {
			client = c.cluster.client
		}
		if c.secureAuth, err = server.LoadSecureAuth(cfg, client, c.cluster.servingCertificate(), time.Now(), log); err != nil {
			return nil, err
		}
	}
	if c.admin, err = adminapi.Listen(ctx, adminapi.SocketPath(cfg.RootDir)); err != nil {
		return nil, err
	}
	c.store, err = podsource.OpenStore(filepath.Join(cfg.RootDir, podsource.StoreDirName), cfg.NodeName,
		clock.RealClock{}, log.With("component", "local-pods"))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// listen claims address:port; no listener for port 0.
func listen(address string, port int32) (net.Listener, error) {
	if port == 0 {
		return nil, nil
	}
	return net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(int(port))))
}

// release closes the admin socket, then the secure and the local API's
// listeners.
func (c *claimed) release() {
	for _, ln := range []net.Listener{c.admin, c.secure, c.api} {
		if ln != nil {
			ln.Close()
		}
	}
}
