// Package adminapi is berth's local read-write API, on a unix socket that
// only root can use (<root-dir>/berth.sock): the pods of `berth apply` and
// `berth delete pod`, exec and attach for `berth exec` and `berth attach`,
// and the containers' logs for `berth logs`. It stands in for the API
// server on a standalone node, in the API server's words: pods are
// created, configured or unchanged, and errors are metav1.Status with the
// API server's reasons and codes. The read-only TCP port of package server
// stays read-only, and serves no logs.
package adminapi
