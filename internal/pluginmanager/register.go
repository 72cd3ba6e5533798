package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// conn is the gRPC edge: a connection to one plugin's registration socket.
type conn interface {
	registerapi.RegistrationClient
	Close() error
}

// dialer connects to the registration socket at path, or fails when ctx
// ends first.
type dialer func(ctx context.Context, path string) (conn, error)

// register runs the kubelet's registration of the plugin at path: GetInfo,
// the checks, the handler's ValidatePlugin and RegisterPlugin, then
// NotifyRegistrationStatus with the outcome. The plugin is told why it was
// refused whenever it answered GetInfo.
func (m *Manager) register(ctx context.Context, path string) (Plugin, error) {
	dctx, cancel := context.WithTimeout(ctx, m.timeouts.dial)
	c, err := m.dial(dctx, path)
	cancel()
	if err != nil {
		return Plugin{}, fmt.Errorf("connecting to plugin socket %s: %w", path, err)
	}
	defer c.Close()

	ictx, cancel := context.WithTimeout(ctx, m.timeouts.getInfo)
	info, err := c.GetInfo(ictx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return Plugin{}, fmt.Errorf("GetInfo on plugin socket %s: %w", path, err)
	}
	plugin, err := checkInfo(path, info, m.handlers)
	var h Handler
	if err == nil {
		h = m.handlers[plugin.Type]
		if verr := h.ValidatePlugin(plugin.Name, plugin.Endpoint, plugin.Versions); verr != nil {
			err = fmt.Errorf("%s plugin %q at %s refused by its handler: %w", plugin.Type, plugin.Name, path, verr)
		}
	}
	if err == nil {
		if rerr := h.RegisterPlugin(ctx, plugin.Name, plugin.Endpoint, plugin.Versions); rerr != nil {
			err = fmt.Errorf("registering %s plugin %q at %s: %w", plugin.Type, plugin.Name, path, rerr)
		}
	}
	if err != nil {
		if nerr := m.notify(ctx, c, false, err.Error()); nerr != nil {
			return Plugin{}, fmt.Errorf("%w (telling the plugin failed too: %v)", err, nerr)
		}
		return Plugin{}, err
	}
	// As in the kubelet, a plugin that cannot be told it is registered is
	// not: it will come back and try again.
	if nerr := m.notify(ctx, c, true, ""); nerr != nil {
		h.DeRegisterPlugin(ctx, plugin.Name, plugin.Endpoint)
		return Plugin{}, fmt.Errorf("telling %s plugin %q at %s it is registered: %w", plugin.Type, plugin.Name, path, nerr)
	}
	return plugin, nil
}

func (m *Manager) notify(ctx context.Context, c conn, registered bool, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeouts.notify)
	defer cancel()
	_, err := c.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: registered, Error: reason})
	if err != nil {
		return fmt.Errorf("NotifyRegistrationStatus: %w", err)
	}
	return nil
}

// checkInfo turns a GetInfo answer into a Plugin, or says what is wrong with
// it. The versions are the handler's to judge (ValidatePlugin), as in the
// kubelet. Unlike the kubelet, an empty name is refused here: no handler
// can use a plugin it cannot name.
func checkInfo(path string, info *registerapi.PluginInfo, handlers map[string]Handler) (Plugin, error) {
	if info == nil {
		return Plugin{}, fmt.Errorf("plugin at %s answered GetInfo with nothing", path)
	}
	if _, ok := handlers[info.Type]; !ok {
		known := slices.Sorted(maps.Keys(handlers))
		return Plugin{}, fmt.Errorf("plugin %q at %s has type %q, which no handler takes (known types: %s)",
			info.Name, path, info.Type, strings.Join(known, ", "))
	}
	if info.Name == "" {
		return Plugin{}, fmt.Errorf("%s plugin at %s answered GetInfo with an empty name", info.Type, path)
	}
	p := Plugin{
		Socket:   path,
		Type:     info.Type,
		Name:     info.Name,
		Endpoint: info.Endpoint,
		Versions: slices.Clone(info.SupportedVersions),
	}
	if p.Endpoint == "" {
		p.Endpoint = path
	}
	return p, nil
}

// grpcConn is a conn over a real gRPC client connection.
type grpcConn struct {
	registerapi.RegistrationClient
	cc *grpc.ClientConn
}

func (g grpcConn) Close() error { return g.cc.Close() }

// dialUnix connects to a unix socket and waits until gRPC is up on it or
// ctx ends, as the kubelet's blocking dial does: a driver's socket file
// appears at bind(), before it listens, so the first attempts may be
// refused. The attempts are closer together than gRPC's default back-off
// (1s and up), so that a driver is registered soon after it listens.
func dialUnix(ctx context.Context, path string) (conn, error) {
	var mu sync.Mutex
	var lastErr error
	cc, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
			mu.Lock()
			lastErr = err
			mu.Unlock()
			return c, err
		}))
	if err != nil {
		return nil, err
	}
	cc.Connect()
	failed := false
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return grpcConn{RegistrationClient: registerapi.NewRegistrationClient(cc), cc: cc}, nil
		case connectivity.TransientFailure:
			failed = true
		}
		if !cc.WaitForStateChange(ctx, s) {
			cc.Close()
			mu.Lock()
			err := lastErr
			mu.Unlock()
			switch {
			case err != nil:
				return nil, fmt.Errorf("no gRPC connection before the timeout (%s), last attempt: %w", s, err)
			case failed:
				return nil, errors.New("the socket accepts connections but does not speak gRPC")
			}
			return nil, fmt.Errorf("no gRPC connection before the timeout (%s): %w", s, ctx.Err())
		}
	}
}
