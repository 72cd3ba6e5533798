package conformance

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// serviceRange is test/cluster's --service-cluster-ip-range.
const serviceRange = "10.0.0.0/24"

// serviceReject keeps a packet to the service range that kube-proxy did not
// translate (a port a Service no longer has) from leaving the machine: it
// is refused, as nothing of a cluster's service range answers on a real
// network. This machine's default route leads to a network that answers
// any TCP connection on port 80 (an HTTP 400), so the Services spec that
// removes a Service's TCP port saw it still "answer". The rules sit in
// filter's OUTPUT and FORWARD, which come after kube-proxy's DNAT; a route
// could not do it, as the host's own connections to a ClusterIP are routed
// before they are translated. Each run's rules carry its own comment, so
// that it removes only its own.
type serviceReject struct{ comment string }

// rejectRules are the iptables rule specs, each for both chains.
func (r serviceReject) rejectRules() [][]string {
	base := []string{"-d", serviceRange, "-m", "comment", "--comment", r.comment}
	return [][]string{
		append(append([]string{}, base...), "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"),
		append(append([]string{}, base...), "-j", "REJECT", "--reject-with", "icmp-port-unreachable"),
	}
}

// newServiceReject is the rules of the run whose control plane's directory
// is named id.
func newServiceReject(id string) *serviceReject {
	return &serviceReject{comment: "berth-conformance " + id + ": service range not translated"}
}

func addServiceReject(ctx context.Context, id string) (*serviceReject, error) {
	r := newServiceReject(id)
	for _, chain := range []string{"OUTPUT", "FORWARD"} {
		// Appended in order (tcp-reset first), inserted at the top.
		rules := r.rejectRules()
		for i := len(rules) - 1; i >= 0; i-- {
			if err := iptables(ctx, append([]string{"-I", chain, "1"}, rules[i]...)...); err != nil {
				r.remove()
				return nil, err
			}
		}
	}
	return r, nil
}

// remove deletes the rules, each as often as it is there.
func (r *serviceReject) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, chain := range []string{"OUTPUT", "FORWARD"} {
		for _, rule := range r.rejectRules() {
			for range 4 {
				if iptables(ctx, append([]string{"-D", chain}, rule...)...) != nil {
					break
				}
			}
		}
	}
}

func iptables(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
