package csi

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"
)

// The kubelet's csiTimeout: how long one call to a driver may take.
const defaultCallTimeout = 2 * time.Minute

// Options configure a Manager. Zero values take the defaults.
type Options struct {
	// Root is the root dir (the kubelet's /var/lib/kubelet); required.
	Root string
	// NodeName is recorded in vol_data.json, as the kubelet does.
	NodeName string
	// Sink takes the drivers' CSINode entries; nil: nobody.
	Sink NodeInfoSink
	// CallTimeout bounds each node operation's call to a driver, and
	// RegisterTimeout each call of a registration; both the kubelet's two
	// minutes by default.
	CallTimeout     time.Duration
	RegisterTimeout time.Duration
	// Mounts tells mount points; the mount table by default.
	Mounts MountChecker
	Log    *slog.Logger
}

// Manager is the node side of CSI: the registered drivers and the node
// operations on their volumes. Its operations may run concurrently for
// different volumes; the caller (the volume manager) runs at most one at a
// time per volume, as the kubelet's operation executor does.
type Manager struct {
	root            string
	nodeName        string
	sink            NodeInfoSink
	callTimeout     time.Duration
	registerTimeout time.Duration
	mounts          MountChecker
	log             *slog.Logger
	// dial is the gRPC edge; tests may replace it.
	dial dialFunc

	// mu guards drivers, which only RegisterPlugin and DeRegisterPlugin
	// change.
	mu      sync.Mutex
	drivers map[string]*entry
}

// New returns a Manager of the volumes under opts.Root.
func New(opts Options) (*Manager, error) {
	if opts.Root == "" {
		return nil, errors.New("CSI manager: no root dir")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("CSI manager: root dir %q: %w", opts.Root, err)
	}
	m := &Manager{
		root:            root,
		nodeName:        opts.NodeName,
		sink:            opts.Sink,
		callTimeout:     opts.CallTimeout,
		registerTimeout: opts.RegisterTimeout,
		mounts:          opts.Mounts,
		log:             opts.Log,
		dial:            dialNode,
		drivers:         map[string]*entry{},
	}
	if m.callTimeout <= 0 {
		m.callTimeout = defaultCallTimeout
	}
	if m.registerTimeout <= 0 {
		m.registerTimeout = defaultCallTimeout
	}
	if m.mounts == nil {
		m.mounts = MountTable{}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.log = m.log.With("component", "csi")
	return m, nil
}

// Root is the root dir the paths are under.
func (m *Manager) Root() string { return m.root }

// OpError is the error of a node operation: which operation, driver and
// volume, and why (a gRPC status from the driver where it answered one).
type OpError struct {
	Op     string // NodeStageVolume, NodePublishVolume, ...
	Driver string
	Volume string // the volume handle
	// Target is the staging or publish target, where there is one.
	Target string
	// Uncertain: the driver may still be doing it (a timeout, a
	// cancellation, a busy answer), so the volume's record is kept and it
	// must be torn down even if it never shows up mounted.
	Uncertain bool
	Err       error
}

func (e *OpError) Error() string {
	s := fmt.Sprintf("CSI %s of volume %q with driver %q", e.Op, e.Volume, e.Driver)
	if e.Target != "" {
		s += " at " + e.Target
	}
	if e.Uncertain {
		s += " (may still be in progress)"
	}
	return s + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }
