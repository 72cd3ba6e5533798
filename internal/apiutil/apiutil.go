// Package apiutil holds what berth's API server clients share: the
// kubelet's UID-guarded status patches, and errors that say which verb and
// resource a Forbidden answer was about.
package apiutil

import (
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// StatusPatch is the strategic merge patch from old to new, objects of the
// same type as schema with only their status set; new also carries uid, so
// the patch lands only on that very object, never on a namesake created
// meanwhile (the kubelet's PatchNodeStatus and PatchPodStatus).
func StatusPatch(old, new, schema any) ([]byte, error) {
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(new)
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, schema)
	if err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	return patch, nil
}

// Explain names the verb and resource of a Forbidden answer, which the
// API server words without them when the Node authorizer refuses.
func Explain(err error, verb, resource string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("forbidden to %s %s (berth's identity must be system:node:<node name> in group system:nodes): %w",
			verb, resource, err)
	}
	return err
}
