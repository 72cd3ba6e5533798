// Package config turns a kubelet configuration file and berth's command-line
// flags into one validated Config.
//
// The file is the kubelet's own KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1), so an existing kubelet config can be brought
// along unchanged. It is decoded strictly: an unknown field, a duplicate field
// or a wrong apiVersion/kind is an error naming the file and the field. Every
// field the file sets that berth does not honour yet is listed in
// Config.Unimplemented, so berth can say so at start-up instead of ignoring it
// silently.
//
// Precedence, lowest first: berth's defaults, the file, flags the user set.
//
// Defaults differ from the kubelet's in two places, both deliberate:
//   - address is 127.0.0.1, not 0.0.0.0, because berth's read-only API has no
//     authentication and should not be reachable from the network unless asked;
//   - readOnlyPort is 10255 when the file does not mention it (the kubelet's
//     file default is 0, disabled), because `berth pods` and `berth logs` read
//     that API. An explicit readOnlyPort: 0 still disables it.
package config
