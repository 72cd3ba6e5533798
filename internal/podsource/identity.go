package podsource

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's annotations for where a pod came from (k8s.io/kubernetes
// pkg/kubelet/types). A pod whose source is not the API server is a static
// pod; with a control plane the node mirrors it there.
const (
	ConfigSourceAnnotationKey = "kubernetes.io/config.source"
	ConfigHashAnnotationKey   = "kubernetes.io/config.hash"
	FileSource                = "file"
	ApiserverSource           = "api"
)

// IsStaticPod reports whether the pod came from a source other than the API
// server, the way the kubelet tells.
func IsStaticPod(pod *v1.Pod) bool {
	source, ok := pod.Annotations[ConfigSourceAnnotationKey]
	return ok && source != ApiserverSource
}

// staticPodUID derives a UID from the node, the file and the manifest as
// decoded, so the same file yields the same UID on every restart and any
// change to it yields a new one: an edit is a replacement. The kubelet
// md5-hashes the same three things. The hash is taken before defaulting so
// that a berth upgrade that learns a new default does not restart pods.
func staticPodUID(decoded *v1.Pod, path, nodeName string) (types.UID, error) {
	content, err := json.Marshal(decoded)
	if err != nil {
		return "", fmt.Errorf("hashing the manifest: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "host:%s\x00file:%s\x00", nodeName, path)
	h.Write(content)
	return types.UID(hex.EncodeToString(h.Sum(nil))[:32]), nil
}

// staticPodName makes the name unique among nodes, as the kubelet does.
func staticPodName(name, nodeName string) string {
	return name + "-" + strings.ToLower(nodeName)
}

// applyStaticIdentity turns a decoded, defaulted manifest into this node's
// static pod. An empty name stays empty so that validation reports it.
func applyStaticIdentity(pod *v1.Pod, uid types.UID, nodeName string) {
	pod.UID = uid
	if pod.Name != "" {
		pod.Name = staticPodName(pod.Name, nodeName)
	}
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigSourceAnnotationKey] = FileSource
	pod.Annotations[ConfigHashAnnotationKey] = string(uid)
	// Static pods tolerate every NoExecute taint so that node trouble never
	// evicts them: nothing would bring them back.
	addToleration(&pod.Spec, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
}

// addToleration adds t, or replaces a toleration for the same taint (which
// could limit it with tolerationSeconds), as the kubelet does.
func addToleration(spec *v1.PodSpec, t v1.Toleration) {
	for i := range spec.Tolerations {
		if spec.Tolerations[i].MatchToleration(&t) {
			spec.Tolerations[i] = t
			return
		}
	}
	spec.Tolerations = append(spec.Tolerations, t)
}
