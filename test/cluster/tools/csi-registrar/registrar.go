// Package registrar serves a CSI driver's kubelet plugin registration
// socket as node-driver-registrar does, and the unix sockets both of the
// tests' drivers listen on.
package registrar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// ListenUnix listens on path, replacing a socket a killed run left there.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the old socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// Server is a registration socket being served.
type Server struct {
	Socket  string
	srv     *grpc.Server
	done    chan struct{} // closed once Serve has returned
	refused chan string   // the refusal's error, once
}

// Start serves <regDir>/<driver>-reg.sock: GetInfo names a CSIPlugin, the
// driver and its CSI socket endpoint, with CSI version 1.0.0, as
// node-driver-registrar's does. Stop ends it.
func Start(regDir, driver, endpoint string) (*Server, error) {
	if !filepath.IsAbs(regDir) {
		return nil, fmt.Errorf("registration directory %q: not an absolute path", regDir)
	}
	s := &Server{
		Socket:  filepath.Join(regDir, driver+"-reg.sock"),
		srv:     grpc.NewServer(),
		done:    make(chan struct{}),
		refused: make(chan string, 1),
	}
	l, err := ListenUnix(s.Socket)
	if err != nil {
		return nil, err
	}
	registerapi.RegisterRegistrationServer(s.srv, &registration{name: driver, endpoint: endpoint, refused: s.refused})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(l); err != nil {
			klog.ErrorS(err, "registration server")
		}
	}()
	klog.InfoS("serving registration", "socket", s.Socket)
	return s, nil
}

// Refused delivers the node's error if it refuses the registration: the
// driver then exits non-zero, as node-driver-registrar does, so that
// whoever runs it sees the failure.
func (s *Server) Refused() <-chan string { return s.refused }

// Stop stops serving and removes the socket.
func (s *Server) Stop() {
	s.srv.Stop()
	<-s.done
	if err := os.Remove(s.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.ErrorS(err, "remove the registration socket")
	}
}

// registration answers a kubelet's plugin watcher.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	refused        chan<- string
	once           sync.Once
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.V(2).InfoS("registration GetInfo")
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !st.PluginRegistered {
		klog.ErrorS(nil, "registration refused", "error", st.Error)
		r.once.Do(func() { r.refused <- st.Error })
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	klog.InfoS("registered")
	return &registerapi.RegistrationStatusResponse{}, nil
}
