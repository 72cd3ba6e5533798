package container

// Labels and annotations berth puts on CRI sandboxes and containers. The keys
// are the kubelet's own, so tools that read them (crictl, monitoring agents)
// understand berth's containers, and berth re-adopts its pods from them after
// a restart without any state file.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash              = "io.kubernetes.container.hash"
	AnnotationRestartCount               = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath     = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy   = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationTerminationGracePeriod     = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationTerminationMessageHostPath = "berth.dev/termination-message-host-path"
	// AnnotationInitContainer marks init containers, so that a pod whose
	// manifest is gone can still be torn down in the right order.
	AnnotationInitContainer = "berth.dev/init-container"

	// LabelManagedBy marks every sandbox berth creates, so berth never
	// touches sandboxes that another client of the same runtime made.
	LabelManagedBy = "berth.dev/managed"
)
