package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// SendRegistration calls Registration.Register on the agent's socket with
// req exactly as given and returns the agent's refusal, if any, as an error
// in which status.Code still finds the agent's code. ctx must carry the
// call's deadline: the call waits for the agent to accept connections.
func SendRegistration(ctx context.Context, kubeletSocket string, req *pluginapi.RegisterRequest) error {
	// Without this check a missing socket only shows as a deadline.
	if _, err := os.Stat(kubeletSocket); err != nil {
		return fmt.Errorf("registering %q: %w", req.GetResourceName(), err)
	}
	conn, err := grpc.NewClient("unix://"+kubeletSocket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The agent's socket appears (bind) a moment before it accepts
		// (listen); retry that gap quickly rather than after gRPC's 1s.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
		}}),
	)
	if err != nil {
		return fmt.Errorf("registering %q with %s: %w", req.GetResourceName(), kubeletSocket, err)
	}
	defer conn.Close()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctx, req, grpc.WaitForReady(true)); err != nil {
		return fmt.Errorf("registering %q with %s: %w", req.GetResourceName(), kubeletSocket, err)
	}
	return nil
}
