package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfigs writes the admin's, the controller-manager's and the
// scheduler's kubeconfigs under dir/kubeconfig.
func (c *ControlPlane) writeKubeconfigs(f pkiFiles) (kcm, scheduler string, err error) {
	dir := filepath.Join(c.dir, "kubeconfig")
	c.admin = filepath.Join(dir, "admin.kubeconfig")
	kcm = filepath.Join(dir, "controller-manager.kubeconfig")
	scheduler = filepath.Join(dir, "scheduler.kubeconfig")
	for path, kp := range map[string]keyPair{c.admin: f.admin, kcm: f.kcm, scheduler: f.scheduler} {
		if err := c.writeKubeconfig(path, kp); err != nil {
			return "", "", err
		}
	}
	return kcm, scheduler, nil
}

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded)
// that authenticates with kp.
func (c *ControlPlane) writeKubeconfig(path string, kp keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["berth-test"] = &clientcmdapi.Cluster{Server: c.server, CertificateAuthorityData: c.ca.certPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.certPEM, ClientKeyData: kp.keyPEM}
	cfg.Contexts["berth-test"] = &clientcmdapi.Context{Cluster: "berth-test", AuthInfo: "user"}
	cfg.CurrentContext = "berth-test"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// NodeKubeconfig writes a kubeconfig for node nodeName, with the client
// certificate a kubelet would bootstrap to (CN system:node:<nodeName>, O
// system:nodes), so the Node authorizer and NodeRestriction treat its user
// as that node. It returns the path, dir/nodes/<nodeName>.kubeconfig.
func (c *ControlPlane) NodeKubeconfig(nodeName string) (string, error) {
	if nodeName == "" || strings.ContainsAny(nodeName, "/\x00") || nodeName == "." || nodeName == ".." {
		return "", fmt.Errorf("node kubeconfig: invalid node name %q", nodeName)
	}
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	dir := filepath.Join(c.dir, "nodes")
	kp, err := c.clientCA.issue(dir, nodeName, certSpec{commonName: "system:node:" + nodeName, orgs: []string{"system:nodes"}})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, nodeName+".kubeconfig")
	return path, c.writeKubeconfig(path, kp)
}

// RESTConfig is the admin's client configuration.
func (c *ControlPlane) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.admin)
}

// Client is a clientset for the admin (system:masters).
func (c *ControlPlane) Client() (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Kubectl runs the built kubectl as the admin, returning its output; err
// includes stderr when it fails. ctx bounds it.
func (c *ControlPlane) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, c.bins.Kubectl, append([]string{
		"--kubeconfig=" + c.admin,
		// Discovery cache here rather than in ~/.kube.
		"--cache-dir=" + filepath.Join(c.dir, "kubectl-cache"),
	}, args...)...)
	// The user's kuberc (aliases, default flags) must not change what tests see.
	cmd.Env = append(os.Environ(), "KUBERC=off")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), nil
}

// defaultServiceAccount succeeds once the controller-manager has created
// the default ServiceAccount in namespace default.
func (c *ControlPlane) defaultServiceAccount(ctx context.Context) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("no default ServiceAccount yet: %w", err)
	}
	return nil
}
