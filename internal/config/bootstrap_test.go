package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestBootstrapOptions(t *testing.T) {
	file := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
rotateCertificates: true
serverTLSBootstrap: true
`
	args := []string{"--kubeconfig", "/var/lib/berth/kubelet.conf", "--bootstrap-kubeconfig", "bootstrap.conf"}
	cfg, err := loadWith(t, file, args, testHost)
	if err != nil {
		t.Fatal(err)
	}
	cl := cfg.Cluster
	abs, _ := filepath.Abs("bootstrap.conf")
	if cl.BootstrapKubeconfigPath != abs || !cl.RotateCertificates || !cl.ServerTLSBootstrap {
		t.Errorf("cluster = %+v", cl)
	}
	if len(cfg.Unimplemented) != 0 {
		t.Errorf("unimplemented = %v", cfg.Unimplemented)
	}
	if k := cfg.Kubelet; !k.RotateCertificates || !k.ServerTLSBootstrap {
		t.Errorf("Kubelet not updated: %v %v", k.RotateCertificates, k.ServerTLSBootstrap)
	}
	cfg, err = loadWith(t, "", []string{"--kubeconfig", "/k", "--rotate-certificates"}, testHost)
	if err != nil || !cfg.Cluster.RotateCertificates {
		t.Errorf("--rotate-certificates: %v, %+v", err, cfg)
	}
}

func TestBootstrapOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		file string
		args []string
		want string
	}{
		{"", []string{"--bootstrap-kubeconfig", "/b"}, "--bootstrap-kubeconfig: needs --kubeconfig"},
		{"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nserverTLSBootstrap: true\n", nil, "serverTLSBootstrap: needs --kubeconfig"},
	} {
		_, err := loadWith(t, tc.file, tc.args, testHost)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}
