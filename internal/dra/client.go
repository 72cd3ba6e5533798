package dra

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// APIClaims reads ResourceClaims from the API server, as the kubelet does
// (a GET per claim, no informer: the claim's allocation and reservation
// must be current when the pod starts).
type APIClaims struct {
	Client kubernetes.Interface
}

// GetResourceClaim implements ClaimGetter.
func (a APIClaims) GetResourceClaim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	return a.Client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}
