package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The groups of bootstrap tokens, as kubeadm names them. Every bootstrap
// token's user is also in system:bootstrappers.
const (
	// AutoApprovedBootstrapGroup is kubeadm's default-node-token group:
	// the controller-manager approves its nodes' client CSRs by itself.
	AutoApprovedBootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"
	// ManualBootstrapGroup may request client certificates, but nothing
	// approves them: a test approves or denies each.
	ManualBootstrapGroup = "system:bootstrappers:berth:manual"
	bootstrappersGroup   = "system:bootstrappers"
	tokenTTL             = time.Hour
)

// bootstrapRBAC creates the ClusterRoleBindings kubeadm's bootstrap-token
// phase creates: every bootstrapper may create CSRs (system:node-bootstrapper),
// the default-node-token group's client CSRs are approved (nodeclient), and
// so are nodes' renewals of their own (selfnodeclient). kubeadm binds
// node-bootstrapper to its token group only; binding it to all
// bootstrappers lets ManualBootstrapGroup's tokens request too.
func (c *ControlPlane) bootstrapRBAC(ctx context.Context) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	bindings := []struct{ name, role, group string }{
		{"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", bootstrappersGroup},
		{"kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", AutoApprovedBootstrapGroup},
		{"kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	}
	for _, b := range bindings {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.group}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("ClusterRoleBinding %s: %w", b.name, err)
		}
	}
	return nil
}

// tokenChars are the characters of a bootstrap token's id and secret.
const tokenChars = "0123456789abcdefghijklmnopqrstuvwxyz"

func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = tokenChars[int(b[i])%len(tokenChars)]
	}
	return string(b), nil
}

// CreateBootstrapToken creates a bootstrap token as `kubeadm token create`
// does: the Secret kube-system/bootstrap-token-<id> for authentication,
// valid for an hour, whose user is in system:bootstrappers and group (one
// of the Bootstrap groups above). It returns "<id>.<secret>".
func (c *ControlPlane) CreateBootstrapToken(ctx context.Context, group string) (string, error) {
	id, err := randomToken(6)
	if err != nil {
		return "", err
	}
	secret, err := randomToken(16)
	if err != nil {
		return "", err
	}
	cs, err := c.Client()
	if err != nil {
		return "", err
	}
	s := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       v1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"description":                    "berth test harness",
			"token-id":                       id,
			"token-secret":                   secret,
			"expiration":                     time.Now().Add(tokenTTL).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"auth-extra-groups":              group,
		},
	}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("bootstrap token secret: %w", err)
	}
	return id + "." + secret, nil
}

// BootstrapKubeconfig creates a bootstrap token in group and writes what
// `kubeadm join` gives a kubelet: a kubeconfig with the apiserver's
// address, its CA and the token, nothing else. It returns its path,
// dir/nodes/<name>.bootstrap.kubeconfig.
func (c *ControlPlane) BootstrapKubeconfig(ctx context.Context, name, group string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return "", fmt.Errorf("bootstrap kubeconfig: invalid name %q", name)
	}
	token, err := c.CreateBootstrapToken(ctx, group)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: c.server, CertificateAuthorityData: c.ca.certPEM}
	cfg.AuthInfos["tls-bootstrap-token-user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["tls-bootstrap-token-user@kubernetes"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "tls-bootstrap-token-user"}
	cfg.CurrentContext = "tls-bootstrap-token-user@kubernetes"
	path := filepath.Join(c.dir, "nodes", name+".bootstrap.kubeconfig")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// ApproveServingCSRs approves every pending kubernetes.io/kubelet-serving
// CSR of node nodeName (nothing in a cluster approves those by itself) and
// returns their names.
func (c *ControlPlane) ApproveServingCSRs(ctx context.Context, nodeName string) ([]string, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	return SetCSRsApproval(ctx, cs, certificatesv1.KubeletServingSignerName, "system:node:"+nodeName, true)
}

// SetCSRsApproval approves (or denies) every pending CSR for signer made by
// user, and returns their names.
func SetCSRsApproval(ctx context.Context, cs kubernetes.Interface, signer, user string, approve bool) ([]string, error) {
	list, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	cond := certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue,
		Reason: "BerthTestApproved", Message: "approved by the berth test harness",
	}
	if !approve {
		cond.Type, cond.Reason, cond.Message = certificatesv1.CertificateDenied, "BerthTestDenied", "denied by the berth test harness"
	}
	var names []string
	for i := range list.Items {
		csr := &list.Items[i]
		if csr.Spec.SignerName != signer || (user != "" && csr.Spec.Username != user) || len(csr.Status.Conditions) > 0 {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, cond)
		if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			return names, fmt.Errorf("CSR %s: %w", csr.Name, err)
		}
		names = append(names, csr.Name)
	}
	return names, nil
}
