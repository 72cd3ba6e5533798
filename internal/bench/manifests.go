package bench

import (
	"fmt"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// The workloads are busybox's own programs, so that what is measured is
// berth and the runtime, not an application.

// webCommand serves a page on port with busybox httpd: something for an
// http readiness probe to ask.
func webCommand(port int) []string {
	return []string{"sh", "-c", fmt.Sprintf("mkdir -p /tmp/www && echo ok >/tmp/www/index.html && exec httpd -f -p %d -h /tmp/www", port)}
}

// sleepCommand idles and leaves on SIGTERM at once.
var sleepCommand = []string{"sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"}

func quoted(args []string) string {
	s := "["
	for i, a := range args {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", a)
	}
	return s + "]"
}

// startupManifest is a web pod that becomes Ready when its page answers.
func startupManifest(name string, hostNetwork bool, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: bench}
spec:
  hostNetwork: %v
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: %s
    command: %s
    readinessProbe:
      httpGet: {path: /, port: %d}
      periodSeconds: 1
`, name, hostNetwork, busyboxRef, quoted(webCommand(port)), port)
}

// reactionManifest is an idle pod that berth restarts whenever it dies.
func reactionManifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: bench}
spec:
  hostNetwork: true
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  containers:
  - name: idle
    image: %s
    command: %s
`, name, busyboxRef, quoted(sleepCommand))
}

// steadyManifest is a web pod with an http readiness and an exec liveness
// probe, each every second: two probes a second per pod.
func steadyManifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: bench}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: %s
    command: %s
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
    livenessProbe:
      exec: {command: ["/bin/true"]}
      periodSeconds: 1
      timeoutSeconds: 5
`, name, busyboxRef, quoted(webCommand(8080)))
}

// densityManifest is a pause-like pod: the sandbox image's own program.
func densityManifest(name string, hostNetwork bool) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: bench}
spec:
  hostNetwork: %v
  terminationGracePeriodSeconds: 1
  containers:
  - name: pause
    image: %s
`, name, hostNetwork, imagebuild.PauseImageRef)
}
