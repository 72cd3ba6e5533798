package podworker

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/envvars"
	"github.com/berth-dev/berth/internal/v1helper"
)

// serviceEnv returns the service variables of pod's containers (the
// kubelet's getServiceEnvVarMap), nil without a source of services.
//
// Until the services were all read once, an API server pod's containers
// wait (CreateContainerConfigError, retried), as the kubelet has them wait:
// otherwise a container starting with berth would miss
// KUBERNETES_SERVICE_HOST for good. A static pod does not wait, since it may
// be the API server itself; it gets whatever was read.
func (w *worker) serviceEnv(pod *v1.Pod) ([]v1.EnvVar, error) {
	src := w.ws.deps.Services
	if src == nil {
		return nil, nil
	}
	if !v1helper.IsStaticPod(pod) && !src.HasSynced() {
		// The kubelet's words.
		return nil, errors.New("services have not yet been read at least once, cannot construct envvars")
	}
	var services []*v1.Service
	for _, ns := range envvars.Namespaces(pod) {
		list, err := src.List(ns)
		if err != nil {
			return nil, fmt.Errorf("service environment variables: %w", err)
		}
		services = append(services, list...)
	}
	return envvars.FromServices(envvars.ForPod(pod, services)), nil
}
