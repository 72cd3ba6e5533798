package containerd

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// errNotListening: nothing listens on containerd's socket (yet).
var errNotListening = errors.New("containerd does not listen")

// criReady says why the CRI plugin cannot run pods yet, from its own
// status: the RuntimeReady and NetworkReady conditions (the two the kubelet
// requires of a runtime) must both be true. nil when it can. Without
// network, NetworkReady is not waited for: a network that comes later
// (NetworkLater) makes the node NotReady, not the start fail.
func criReady(status *runtimeapi.RuntimeStatus, network bool) error {
	wants := []string{runtimeapi.RuntimeReady}
	if network {
		wants = append(wants, runtimeapi.NetworkReady)
	}
	var errs []error
	for _, want := range wants {
		errs = append(errs, conditionTrue(status.GetConditions(), want))
	}
	return errors.Join(errs...)
}

func conditionTrue(conditions []*runtimeapi.RuntimeCondition, want string) error {
	for _, c := range conditions {
		if c.GetType() != want {
			continue
		}
		if c.GetStatus() {
			return nil
		}
		return fmt.Errorf("CRI condition %s is false: reason %q, message %q", want, c.GetReason(), c.GetMessage())
	}
	return fmt.Errorf("CRI status has no %s condition", want)
}

// probeCRI checks that containerd answers on socket and that its CRI
// plugin is ready to run pods. containerd serves its socket (and Version)
// before the CRI plugin has recovered the pods it already has; until then
// every CRI call fails with "server is not initialized yet", and the
// longer the more pods there are. The dial comes first: gRPC would
// otherwise back off for a second after a missing socket.
func probeCRI(ctx context.Context, socket string, network bool) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("%w: %w", errNotListening, err)
	}
	conn.Close()
	c, err := newClient(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	grpcConn, ok := c.Conn().(*grpc.ClientConn)
	if !ok {
		return errors.New("containerd client has no gRPC connection")
	}
	resp, err := runtimeapi.NewRuntimeServiceClient(grpcConn).Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("CRI status: %w", err)
	}
	return criReady(resp.GetStatus(), network)
}
