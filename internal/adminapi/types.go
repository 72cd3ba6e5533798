package adminapi

import (
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/podsource"
)

// SocketName is the socket's name in berth's root dir.
const SocketName = "berth.sock"

// SocketPath is the socket of the berth whose root dir is rootDir.
func SocketPath(rootDir string) string { return filepath.Join(rootDir, SocketName) }

// ApplyResponse answers POST /pods: one result per pod of the request, in
// request order. Its HTTP code is 200 when every pod was applied, else the
// code of the first refused pod. A request refused as a whole answers a
// metav1.Status instead.
type ApplyResponse struct {
	Pods []PodResult `json:"pods"`
}

// PodResult is what became of one pod (one YAML document) of a request.
type PodResult struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`
	// Line is the document's first line in the request body, 1-based.
	Line int `json:"line,omitempty"`
	// Result is "created", "configured" or "unchanged"; empty when Error is set.
	Result podsource.Applied `json:"result,omitempty"`
	Error  *metav1.Status    `json:"error,omitempty"`
}
