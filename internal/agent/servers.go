package agent

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/internal/adminapi"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/podresources"
	"github.com/berth-dev/berth/internal/server"
)

// servers are berth's APIs: the admin socket (berth apply and delete,
// exec, attach, logs, pprof), the pod-resources socket, and the read-only
// and secure HTTP APIs on the listeners claimed at start-up. Each reads
// the pods through api (the sync loop's view, the status manager, the
// runtime). Run serves them all until ctx is done and returns once each
// has stopped; a server that fails is logged, and the others go on.
type servers struct {
	serve []func(ctx context.Context)
}

// serversDeps are what the servers are built from.
type serversDeps struct {
	cfg     *config.Config
	claimed *claimed
	sources *podSources
	api     *apiSource
	// claims are the pods' prepared ResourceClaims; nil without DRA.
	claims   podresources.ClaimsProvider
	registry prometheus.Gatherer
	log      *slog.Logger
}

func newServers(d serversDeps) *servers {
	cfg, log, api, c := d.cfg, d.log, d.api, d.claimed
	s := &servers{}
	admin := adminapi.NewHandler(c.store, d.sources.merge, cfg.NodeName, log,
		adminapi.WithStreaming(server.NewStreamingHandler(api, api.cri, log)),
		adminapi.WithLogs(server.NewLogsHandler(api, log)),
		adminapi.WithProfiling())
	s.serve = append(s.serve, func(ctx context.Context) {
		if err := adminapi.Serve(ctx, c.admin, admin, log); err != nil {
			log.Error("admin API stopped", "socket", c.admin.Addr().String(), "err", err)
		}
	})
	s.serve = append(s.serve, func(ctx context.Context) {
		sock := filepath.Join(cfg.PodResourcesDir, podresources.SocketName)
		srv := podresources.NewServer(activePods{api.statuses}, api.devices, d.claims)
		if err := podresources.Serve(ctx, sock, srv, log); err != nil {
			log.Error("pod-resources API stopped", "socket", sock, "err", err)
		}
	})
	if c.api != nil {
		srv := server.New(c.api.Addr().String(), api, d.registry, log)
		s.serve = append(s.serve, serveHTTP(srv, c.api, "local API stopped", log))
	}
	if c.secure != nil {
		srv := server.NewSecure(c.secure.Addr().String(), api, d.registry,
			server.NewStreamingHandler(api, api.cri, log), c.secureAuth.Auth, c.secureAuth.TLS,
			log.With("api", "secure"))
		s.serve = append(s.serve, serveHTTP(srv, c.secure, "secure API stopped", log))
	}
	return s
}

func serveHTTP(srv *server.Server, ln net.Listener, stopped string, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error(stopped, "err", err)
		}
	}
}

func (s *servers) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, serve := range s.serve {
		wg.Go(func() { serve(ctx) })
	}
	wg.Wait()
}
