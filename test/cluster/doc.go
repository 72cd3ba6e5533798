// Package cluster runs a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) on loopback for the cluster-mode
// end-to-end tests, which join berth to it as a Node.
//
// The binaries come from the separate module in tools/, so berth itself never
// depends on k8s.io/kubernetes: Build compiles them once into a cache keyed by
// that module's go.mod and go.sum. Start then brings up a control plane whose
// every file (certificates, kubeconfigs, etcd data, logs) lives in one
// directory, and Stop takes it down again.
package cluster
