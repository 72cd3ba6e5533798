package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// MetricsServerAPIServerArgs are the flags the apiserver needs (in
// Options.APIServerArgs) to reach a metrics-server run as a host process:
// it calls the endpoint of the Service, the host's address, rather than
// the Service's ClusterIP, which only kube-proxy's rules make routable.
var MetricsServerAPIServerArgs = []string{"--enable-aggregator-routing=true"}

// MetricsServer is metrics-server run as a host process, registered as
// the metrics.k8s.io API through an APIService.
type MetricsServer struct {
	proc *process
	c    *ControlPlane
}

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

const metricsAPIService = "v1beta1.metrics.k8s.io"

// StartMetricsServer starts metrics-server, its files under
// c.Dir()/metrics-server, with the metrics-server Service in kube-system
// (selector-less, one EndpointSlice naming the host's address) and the
// v1beta1.metrics.k8s.io APIService, and returns once the APIService is
// Available. It scrapes every Node's kubelet endpoint without verifying its
// serving certificate (berth's are self-signed). ctx bounds the start only.
func (c *ControlPlane) StartMetricsServer(ctx context.Context, bin string) (*MetricsServer, error) {
	m := &MetricsServer{c: c}
	if err := m.start(ctx, bin); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

func (m *MetricsServer) start(ctx context.Context, bin string) error {
	c := m.c
	dir := filepath.Join(c.dir, "metrics-server")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	const user = "system:metrics-server"
	// metrics-server's own manifests' role, and the delegated authentication
	// and authorization of any aggregated API server.
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	}
	if err := grant(ctx, cs, user, rules, "system:auth-delegator"); err != nil {
		return err
	}
	kubeconfig, err := c.ClientKubeconfig("metrics-server", user)
	if err != nil {
		return err
	}
	ip, err := HostAddress()
	if err != nil {
		return err
	}
	port, err := freeHostPort(ip)
	if err != nil {
		return err
	}
	m.proc, err = startProcess("metrics-server", filepath.Join(c.dir, "logs", "metrics-server.log"), bin,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--bind-address="+ip.String(),
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+dir,
		"--kubelet-insecure-tls",
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--kubelet-use-node-status-port",
		"--metric-resolution=10s",
	)
	if err != nil {
		return err
	}
	err = createHostService(ctx, cs, "kube-system", "metrics-server", "",
		map[string]string{"k8s-app": "metrics-server"}, ip, []servicePort{{"https", v1.ProtocolTCP, 443, int32(port)}})
	if err != nil {
		return err
	}
	if err := m.register(ctx); err != nil {
		return err
	}
	return waitProcess(ctx, 2*time.Minute, m.proc, "metrics-server's APIService", m.available)
}

// register creates the APIService: the apiserver verifies no serving
// certificate (metrics-server's is self-signed, as its own manifests have
// it with insecureSkipTLSVerify).
func (m *MetricsServer) register(ctx context.Context) error {
	cfg, err := m.c.RESTConfig()
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	obj := map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": metricsAPIService},
		"spec": map[string]any{
			"service":               map[string]any{"name": "metrics-server", "namespace": "kube-system", "port": int64(443)},
			"group":                 "metrics.k8s.io",
			"version":               "v1beta1",
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(100),
			"versionPriority":       int64(100),
		},
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dc.Resource(apiServiceGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create APIService %s: %w", metricsAPIService, err)
	}
	return nil
}

// available succeeds once the APIService's Available condition is True.
func (m *MetricsServer) available(ctx context.Context) error {
	cfg, err := m.c.RESTConfig()
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	u, err := dc.Resource(apiServiceGVR).Get(ctx, metricsAPIService, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conds {
		cm, _ := cond.(map[string]any)
		if cm["type"] == "Available" {
			if cm["status"] == "True" {
				return nil
			}
			return fmt.Errorf("APIService %s not available: %v: %v", metricsAPIService, cm["reason"], cm["message"])
		}
	}
	return fmt.Errorf("APIService %s has no Available condition yet", metricsAPIService)
}

// Stop stops metrics-server and removes its APIService and Service. Safe to
// call twice.
func (m *MetricsServer) Stop() error {
	if m.proc == nil {
		return nil
	}
	errs := []error{m.proc.stop(stopGrace)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg, err := m.c.RESTConfig(); err == nil {
		if dc, err := dynamic.NewForConfig(cfg); err == nil {
			_ = dc.Resource(apiServiceGVR).Delete(ctx, metricsAPIService, metav1.DeleteOptions{})
		}
	}
	if cs, err := m.c.Client(); err == nil {
		deleteHostService(ctx, cs, "kube-system", "metrics-server")
	}
	return errors.Join(errs...)
}

// Log is the path of metrics-server's log.
func (m *MetricsServer) Log() string { return m.proc.Log }
