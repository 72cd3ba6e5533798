package kuberuntime

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func metaWith(name, namespace, uid string, labels, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(uid), Labels: labels, Annotations: annotations}
}

func ptr[T any](v T) *T { return &v }
