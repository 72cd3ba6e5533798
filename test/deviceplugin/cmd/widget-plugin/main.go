// Command widget-plugin runs the test device plugin by hand: it advertises
// -devices widgets (widget-0, widget-1, ...) as -resource to the node agent
// whose plugin directory is -dir, and keeps them registered across agent
// restarts. SIGHUP restarts the plugin the way a restart of its pod would,
// SIGUSR1 toggles the health of widget-0, SIGINT or SIGTERM stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/berth-dev/berth/test/deviceplugin"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func main() {
	dir := flag.String("dir", filepath.Clean(pluginapi.DevicePluginPath), "plugin directory holding the agent's kubelet.sock")
	resource := flag.String("resource", "example.com/widget", "extended resource name to advertise")
	devices := flag.Int("devices", 2, "number of devices to advertise, widget-0 to widget-<N-1>")
	socket := flag.String("socket", "widget.sock", "file name of the plugin's socket in -dir")
	prestart := flag.Bool("prestart", false, "ask the agent to call PreStartContainer")
	preferred := flag.Bool("preferred", false, "offer GetPreferredAllocation")
	hostPath := flag.String("host-path", deviceplugin.DefaultDeviceHostPath, "host path behind every allocated device")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "widget-plugin: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if *devices < 0 {
		fmt.Fprintf(os.Stderr, "widget-plugin: -devices: must not be negative, got %d\n", *devices)
		os.Exit(2)
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "widget-plugin: -dir: %v\n", err)
		os.Exit(2)
	}
	cfg := deviceplugin.Config{
		Dir:                             absDir,
		ResourceName:                    *resource,
		SocketName:                      *socket,
		PreStartRequired:                *prestart,
		GetPreferredAllocationAvailable: *preferred,
		DeviceHostPath:                  *hostPath,
	}
	for i := range *devices {
		cfg.Devices = append(cfg.Devices, deviceplugin.Device{ID: fmt.Sprintf("widget-%d", i)})
	}
	if err := run(cfg); err != nil {
		slog.Error("widget-plugin", "err", err)
		os.Exit(1)
	}
}

// run serves cfg until SIGINT or SIGTERM, acting on SIGHUP and SIGUSR1.
func run(cfg deviceplugin.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(sigs)

	p, err := deviceplugin.New(cfg)
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	defer p.Stop()
	slog.Info("running", "resource", cfg.ResourceName, "socket", p.SocketPath(), "devices", len(cfg.Devices))

	healthy := true
	for {
		select {
		case <-ctx.Done():
			slog.Info("stopping", "cause", context.Cause(ctx))
			return nil
		case sig := <-sigs:
			switch sig {
			case syscall.SIGHUP:
				if err := p.Restart(ctx); err != nil && !errors.Is(err, context.Canceled) {
					slog.Error("restart", "err", err)
				}
			case syscall.SIGUSR1:
				if len(cfg.Devices) == 0 {
					slog.Warn("no device whose health to toggle")
					continue
				}
				healthy = !healthy
				p.SetHealth(cfg.Devices[0].ID, healthy)
				slog.Info("health changed", "device", cfg.Devices[0].ID, "healthy", healthy)
			}
		}
	}
}
