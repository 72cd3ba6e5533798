// Package volume prepares a pod's volumes on the host and tears them down,
// under <rootDir>/pods/<uid>/ with the kubelet's layout:
//
//	pods/<uid>/volumes/kubernetes.io~empty-dir/<name>     emptyDir (tmpfs for medium Memory)
//	pods/<uid>/volumes/kubernetes.io~configmap/<name>     configMap
//	pods/<uid>/volumes/kubernetes.io~secret/<name>        secret (tmpfs)
//	pods/<uid>/volumes/kubernetes.io~downward-api/<name>  downwardAPI
//	pods/<uid>/volumes/kubernetes.io~projected/<name>     projected (tmpfs), e.g. kube-api-access-*
//	pods/<uid>/containers/<name>/                         per-container files
//	pods/<uid>/etc-hosts                                  the managed /etc/hosts
//
// hostPath volumes live where the pod says and are only checked, never
// created beyond what their type asks for, and never removed.
//
// configMap, secret, downwardAPI and projected volumes are written from the
// API (package podobjects) the way the kubelet's AtomicWriter writes them,
// and rewritten at every Setup, so that updates of the objects, token
// renewals and label changes reach running containers.
package volume
