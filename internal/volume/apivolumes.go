package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-dev/berth/internal/podobjects"
)

// The kubelet's plugin directory names for volumes written from the API.
const (
	configMapPluginDir   = "kubernetes.io~configmap"
	secretPluginDir      = "kubernetes.io~secret"
	downwardAPIPluginDir = "kubernetes.io~downward-api"
	projectedPluginDir   = "kubernetes.io~projected"
)

// SetupOptions are what volumes written from the API need besides the pod.
type SetupOptions struct {
	// Objects reads configMaps, secrets and service account tokens; nil on
	// a standalone node, where the volumes that need them are refused.
	Objects podobjects.Source
	// NodeAllocatable answers the resourceFieldRef limits that a
	// container of the pod leaves unset, as in environment variables.
	NodeAllocatable v1.ResourceList
}

// NeedsRefresh reports whether pod has volumes whose content follows API
// objects (configMap, secret, projected tokens) or the pod's own metadata
// (downwardAPI), and so must be set up again while the pod runs, as the
// kubelet's volume manager remounts them at every pod sync; or CSI volumes,
// which the kubelet's reconciler mounts again should they be lost, and
// republishes where the driver asks for it (requiresRepublish).
func NeedsRefresh(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		src := &pod.Spec.Volumes[i].VolumeSource
		if src.ConfigMap != nil || src.Secret != nil || src.DownwardAPI != nil || src.Projected != nil {
			return true
		}
		if src.PersistentVolumeClaim != nil || src.Ephemeral != nil || src.CSI != nil {
			return true
		}
	}
	return false
}

func errNeedsAPIServer(kind string) error {
	return fmt.Errorf("%s volumes need an API server, and this node has none", kind)
}

// setupConfigMap writes a configMap volume (on disk, like the kubelet's).
// A missing configMap is an error unless the volume is optional: then the
// volume is empty.
func (m *Manager) setupConfigMap(ctx context.Context, pod *v1.Pod, name string, src *v1.ConfigMapVolumeSource, opts SetupOptions) (string, error) {
	if opts.Objects == nil {
		return "", errNeedsAPIServer("configMap")
	}
	payload, err := configMapSourcePayload(ctx, pod, src.Name, src.Items, src.Optional, modeOr(src.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode), opts.Objects)
	if err != nil {
		return "", err
	}
	return m.writeVolume(pod, configMapPluginDir, name, false, payload)
}

// setupSecret writes a secret volume, on tmpfs so that secrets never reach
// the node's disk.
func (m *Manager) setupSecret(ctx context.Context, pod *v1.Pod, name string, src *v1.SecretVolumeSource, opts SetupOptions) (string, error) {
	if opts.Objects == nil {
		return "", errNeedsAPIServer("secret")
	}
	payload, err := secretSourcePayload(ctx, pod, src.SecretName, src.Items, src.Optional, modeOr(src.DefaultMode, v1.SecretVolumeSourceDefaultMode), opts.Objects)
	if err != nil {
		return "", err
	}
	return m.writeVolume(pod, secretPluginDir, name, true, payload)
}

// setupDownwardAPI writes a downwardAPI volume; it needs no API server.
func (m *Manager) setupDownwardAPI(pod *v1.Pod, name string, src *v1.DownwardAPIVolumeSource, opts SetupOptions) (string, error) {
	payload, err := downwardAPIPayload(src.Items, pod, modeOr(src.DefaultMode, v1.DownwardAPIVolumeSourceDefaultMode), opts.NodeAllocatable)
	if err != nil {
		return "", err
	}
	return m.writeVolume(pod, downwardAPIPluginDir, name, false, payload)
}

// setupProjected writes a projected volume, on tmpfs: it usually holds a
// token. Every source is tried and their errors returned together, as the
// kubelet does, so that one message names everything missing.
func (m *Manager) setupProjected(ctx context.Context, pod *v1.Pod, name string, src *v1.ProjectedVolumeSource, opts SetupOptions) (string, error) {
	defaultMode := modeOr(src.DefaultMode, v1.ProjectedVolumeSourceDefaultMode)
	payload := map[string]FileProjection{}
	var errs []error
	for i := range src.Sources {
		part, err := projectionPayload(ctx, pod, &src.Sources[i], defaultMode, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for p, f := range part {
			payload[p] = f
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return m.writeVolume(pod, projectedPluginDir, name, true, payload)
}

func projectionPayload(ctx context.Context, pod *v1.Pod, p *v1.VolumeProjection, defaultMode int32, opts SetupOptions) (map[string]FileProjection, error) {
	needObjects := func(kind string) error {
		if opts.Objects == nil {
			return fmt.Errorf("projected %s needs an API server, and this node has none", kind)
		}
		return nil
	}
	switch {
	case p.ConfigMap != nil:
		if err := needObjects("configMap"); err != nil {
			return nil, err
		}
		return configMapSourcePayload(ctx, pod, p.ConfigMap.Name, p.ConfigMap.Items, p.ConfigMap.Optional, defaultMode, opts.Objects)
	case p.Secret != nil:
		if err := needObjects("secret"); err != nil {
			return nil, err
		}
		return secretSourcePayload(ctx, pod, p.Secret.Name, p.Secret.Items, p.Secret.Optional, defaultMode, opts.Objects)
	case p.DownwardAPI != nil:
		return downwardAPIPayload(p.DownwardAPI.Items, pod, defaultMode, opts.NodeAllocatable)
	case p.ServiceAccountToken != nil:
		if err := needObjects("serviceAccountToken"); err != nil {
			return nil, err
		}
		return tokenPayload(ctx, pod, p.ServiceAccountToken, defaultMode, opts.Objects)
	case p.ClusterTrustBundle != nil:
		return nil, fmt.Errorf("projected clusterTrustBundle is not supported by berth")
	case p.PodCertificate != nil:
		return nil, fmt.Errorf("projected podCertificate is not supported by berth")
	}
	return nil, fmt.Errorf("projection with no source set")
}

func configMapSourcePayload(ctx context.Context, pod *v1.Pod, cmName string, items []v1.KeyToPath, optional *bool, mode int32, objs podobjects.Source) (map[string]FileProjection, error) {
	opt := optional != nil && *optional
	cm, err := objs.GetConfigMap(ctx, pod.Namespace, cmName)
	if err != nil {
		if !apierrors.IsNotFound(err) || !opt {
			return nil, err
		}
		cm = &v1.ConfigMap{}
	}
	return configMapPayload(items, cm, mode, opt)
}

func secretSourcePayload(ctx context.Context, pod *v1.Pod, secretName string, items []v1.KeyToPath, optional *bool, mode int32, objs podobjects.Source) (map[string]FileProjection, error) {
	opt := optional != nil && *optional
	s, err := objs.GetSecret(ctx, pod.Namespace, secretName)
	if err != nil {
		if !apierrors.IsNotFound(err) || !opt {
			return nil, err
		}
		s = &v1.Secret{}
	}
	return secretPayload(items, s, mode, opt)
}

// tokenPayload asks for a token bound to the pod, for the pod's service
// account. When the pod has one non-root user (fsUser) or an fsGroup, the
// token is 0600 owned by that user, or made group-readable by the fsGroup
// ownership, as the kubelet does, rather than the volume's 0644.
func tokenPayload(ctx context.Context, pod *v1.Pod, p *v1.ServiceAccountTokenProjection, defaultMode int32, objs podobjects.Source) (map[string]FileProjection, error) {
	var auds []string
	if p.Audience != "" {
		auds = []string{p.Audience}
	}
	tr, err := objs.GetServiceAccountToken(ctx, pod.Namespace, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         auds,
			ExpirationSeconds: p.ExpirationSeconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("service account %q token: %w", pod.Spec.ServiceAccountName, err)
	}
	fsUser := fsUserFrom(pod)
	mode := defaultMode
	if fsUser != nil || podFSGroup(pod) != nil {
		mode = 0o600
	}
	return map[string]FileProjection{p.Path: {Data: []byte(tr.Status.Token), Mode: mode, FsUser: fsUser}}, nil
}

// writeVolume makes the volume's directory, on a tmpfs when memory is set,
// and writes payload into it atomically.
func (m *Manager) writeVolume(pod *v1.Pod, pluginDir, name string, memory bool, payload map[string]FileProjection) (string, error) {
	dir := filepath.Join(m.PodDir(pod.UID), "volumes", pluginDir, name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return "", err
	}
	if err := makeDirWithPerm(dir, emptyDirPerm); err != nil {
		return "", err
	}
	if memory {
		if _, err := m.setupTmpfs(pod.UID, name, dir, nil); err != nil {
			return "", err
		}
	}
	var setPerms func() error
	if gid := podFSGroup(pod); gid != nil {
		setPerms = func() error { return setVolumeOwnership(dir, *gid, true) }
	}
	if err := writeAtomic(dir, payload, setPerms); err != nil {
		return "", fmt.Errorf("writing %s: %w", dir, err)
	}
	return dir, nil
}
