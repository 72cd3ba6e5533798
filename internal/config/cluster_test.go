package config

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestClusterOptions(t *testing.T) {
	file := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
registerNode: false
providerID: berth://edge-1
nodeStatusReportFrequency: 1m
nodeLeaseDurationSeconds: 20
`
	args := []string{"--kubeconfig", "/etc/berth/kubeconfig", "--node-labels", "zone=a,tier=edge",
		"--register-with-taints", "dedicated=edge:NoSchedule", "--node-ip", "10.0.0.5",
		"--node-status-update-frequency", "3s", "--client-ca-file", "/etc/berth/ca.crt"}
	cfg, err := loadWith(t, file, args, testHost)
	if err != nil {
		t.Fatal(err)
	}
	cl := cfg.Cluster
	if !cl.Enabled() || cl.RegisterNode || cl.ProviderID != "berth://edge-1" || cl.NodeIP != "10.0.0.5" ||
		cl.NodeStatusUpdateFrequency != 3*time.Second || cl.NodeStatusReportFrequency != time.Minute ||
		cl.NodeLeaseDurationSeconds != 20 || cl.NodeLabels["zone"] != "a" || cl.NodeLabels["tier"] != "edge" {
		t.Errorf("cluster = %+v", cl)
	}
	if want := []v1.Taint{{Key: "dedicated", Value: "edge", Effect: v1.TaintEffectNoSchedule}}; len(cl.RegisterWithTaints) != 1 ||
		cl.RegisterWithTaints[0] != want[0] {
		t.Errorf("taints = %+v", cl.RegisterWithTaints)
	}
	// A node of a cluster serves the API server on the kubelet's port, with
	// the kubelet's delegated authentication and authorization.
	s := cfg.Serving
	if s.Port != DefaultClusterPort || s.AuthorizationMode != "Webhook" || s.WebhookAuthentication == nil || !*s.WebhookAuthentication {
		t.Errorf("serving = %+v", s)
	}
	if k := cfg.Kubelet; k.RegisterNode == nil || *k.RegisterNode || k.NodeLeaseDurationSeconds != 20 {
		t.Errorf("Kubelet not updated: registerNode %v, lease %d", k.RegisterNode, k.NodeLeaseDurationSeconds)
	}

	// Standalone keeps the secure API off.
	cfg, err = loadWith(t, "", nil, testHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.Enabled() || cfg.Serving.Port != 0 {
		t.Errorf("standalone: cluster %+v, port %d", cfg.Cluster, cfg.Serving.Port)
	}
}

func TestClusterOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--register-with-taints", "novalue"}, `registerWithTaints (--register-with-taints): "novalue": want key=value:Effect`},
		{[]string{"--register-with-taints", "a=b:Sometimes"}, `effect "Sometimes": must be NoSchedule, PreferNoSchedule or NoExecute`},
		{[]string{"--node-labels", "bad key=x"}, `--node-labels: label key "bad key"`},
		{[]string{"--node-ip", "not-an-ip"}, `--node-ip: "not-an-ip" is not an IP address`},
		{[]string{"--node-status-update-frequency", "0s"}, `nodeStatusUpdateFrequency (--node-status-update-frequency): 0s must be positive`},
	} {
		_, err := loadWith(t, "", tc.args, testHost)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}
