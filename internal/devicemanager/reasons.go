package devicemanager

// The reasons of the device manager's pod statuses and events. The first two
// are the kubelet's; the node-level ones are berth's, since the kubelet only
// logs these.
const (
	// ReasonUnexpectedAdmissionError rejects a pod whose devices could not
	// be allocated.
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
	// ReasonDevicePluginNotReady keeps a pod Pending while the plugin of a
	// resource it needs has not registered.
	ReasonDevicePluginNotReady = "DevicePluginNotReady"

	ReasonCheckpointCorrupt = "DeviceCheckpointCorrupt"
	// ReasonAllocationsRecovered: the checkpoint was lost and the
	// allocations were read back from the runtime's containers.
	ReasonAllocationsRecovered = "DeviceAllocationsRecovered"
	// ReasonCheckpointStale: a valid checkpoint disagreed with the
	// runtime's containers, whose record was kept.
	ReasonCheckpointStale    = "DeviceCheckpointStale"
	ReasonPluginRegistered   = "DevicePluginRegistered"
	ReasonPluginRefused      = "DevicePluginRefused"
	ReasonPluginDisconnected = "DevicePluginDisconnected"
	ReasonInvalidDeviceList  = "DevicePluginInvalidDevices"
	ReasonConflictingOptions = "DeviceOptionsConflict"
)
