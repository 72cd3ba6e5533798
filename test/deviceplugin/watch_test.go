package deviceplugin

import (
	"testing"

	"github.com/fsnotify/fsnotify"
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		o    observation
		want reaction
	}{
		{"nothing changed", observation{kubeletExists: true, socketIntact: true}, reaction{}},
		{"agent restarted", observation{kubeletCreated: true, kubeletExists: true, socketIntact: true}, reaction{register: true}},
		{"agent created and gone again", observation{kubeletCreated: true, socketIntact: true}, reaction{}},
		{"socket removed", observation{kubeletExists: true}, reaction{restartServer: true, register: true}},
		{"socket removed, agent away", observation{}, reaction{restartServer: true}},
		{"retry", observation{kubeletExists: true, socketIntact: true, lastReactFailed: true}, reaction{register: true}},
		{"retry, agent away", observation{socketIntact: true, lastReactFailed: true}, reaction{}},
		{"retry of a failed restart", observation{kubeletExists: true, lastReactFailed: true}, reaction{restartServer: true, register: true}},
	}
	for _, tt := range tests {
		if got := decide(tt.o); got != tt.want {
			t.Errorf("%s: decide(%+v) = %+v, want %+v", tt.name, tt.o, got, tt.want)
		}
	}
}

func TestRelevant(t *testing.T) {
	p := &Plugin{cfg: Config{SocketName: "widget.sock"}}
	tests := []struct {
		ev                      fsnotify.Event
		matters, kubeletCreated bool
	}{
		{fsnotify.Event{Name: "/d/kubelet.sock", Op: fsnotify.Create}, true, true},
		{fsnotify.Event{Name: "/d/kubelet.sock", Op: fsnotify.Remove}, false, false},
		{fsnotify.Event{Name: "/d/widget.sock", Op: fsnotify.Remove}, true, false},
		{fsnotify.Event{Name: "/d/widget.sock", Op: fsnotify.Rename}, true, false},
		{fsnotify.Event{Name: "/d/widget.sock", Op: fsnotify.Create}, false, false},
		{fsnotify.Event{Name: "/d/other.sock", Op: fsnotify.Remove}, false, false},
		{fsnotify.Event{Name: "/d/kubelet_internal_checkpoint", Op: fsnotify.Create}, false, false},
	}
	for _, tt := range tests {
		matters, created := p.relevant(tt.ev)
		if matters != tt.matters || created != tt.kubeletCreated {
			t.Errorf("relevant(%v) = %v, %v; want %v, %v", tt.ev, matters, created, tt.matters, tt.kubeletCreated)
		}
	}
}
