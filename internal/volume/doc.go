// Package volume prepares a pod's volumes on the host and tears them down,
// under <rootDir>/pods/<uid>/ with the kubelet's layout:
//
//	pods/<uid>/volumes/kubernetes.io~empty-dir/<name>   emptyDir (tmpfs for medium Memory)
//	pods/<uid>/containers/<name>/                       per-container files
//	pods/<uid>/etc-hosts                                the managed /etc/hosts
//
// hostPath volumes live where the pod says and are only checked, never
// created beyond what their type asks for, and never removed.
package volume
