package podworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/credentialprovider"
)

// pullCredentials returns the credentials from the pod's imagePullSecrets
// that match image, in the order to try them; none for an anonymous pull.
// As in the kubelet, a pull secret that cannot be read is skipped with a
// FailedToRetrieveImagePullSecret warning (the pull may still work), while
// one whose docker config does not parse fails the pull.
func (w *worker) pullCredentials(ctx context.Context, pod *v1.Pod, image string, log *slog.Logger) ([]*runtimeapi.AuthConfig, error) {
	objs := w.ws.deps.Objects
	if objs == nil || len(pod.Spec.ImagePullSecrets) == 0 {
		return nil, nil
	}
	var secrets []*v1.Secret
	var failed []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			// The API server let empty names through once; they
			// name nothing.
			continue
		}
		s, err := objs.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			log.Info("unable to retrieve pull secret; the image pull may not succeed", "secret", ref.Name, "err", err)
			failed = append(failed, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	if len(failed) > 0 {
		w.event(pod, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret", fmt.Sprintf(
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(failed, ", ")))
	}
	keyring, err := credentialprovider.KeyringFromSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return credentialprovider.Credentials(image, keyring)
}

// pullWithCredentials pulls image anonymously when creds is empty, else
// with each credential in turn until one works, as the kubelet does; like
// the kubelet it does not fall back to an anonymous pull once credentials
// matched.
func (w *worker) pullWithCredentials(ctx context.Context, image string, creds []*runtimeapi.AuthConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	rt := w.ws.deps.Runtime
	if len(creds) == 0 {
		return rt.PullImage(ctx, image, sbCfg)
	}
	ap, ok := rt.(AuthPuller)
	if !ok {
		return "", fmt.Errorf("the pod's imagePullSecrets have credentials for %q, but berth's runtime client cannot pass credentials to the runtime", image)
	}
	var errs []error
	for _, auth := range creds {
		ref, err := ap.PullImageWithAuth(ctx, image, auth, sbCfg)
		if err == nil {
			return ref, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}
