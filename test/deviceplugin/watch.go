package deviceplugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/utils/clock"
)

// observation is what the watch loop knows when it reacts.
type observation struct {
	kubeletCreated  bool // the event was kubelet.sock being created: the agent (re)started
	kubeletExists   bool // kubelet.sock is there now
	socketIntact    bool // the plugin is serving and its socket file is the one it created
	lastReactFailed bool // the previous reaction failed, and this is its retry
}

// reaction is what the watch loop does about an observation.
type reaction struct {
	restartServer bool
	register      bool
}

// decide is the plugin's reaction to a change in the plugin directory. A
// socket the plugin no longer owns means the agent (or someone) cleaned the
// directory: serve again. Registering needs kubelet.sock; when it is
// missing, its creation will be the next event.
func decide(o observation) reaction {
	r := reaction{restartServer: !o.socketIntact}
	r.register = o.kubeletExists && (r.restartServer || o.kubeletCreated || o.lastReactFailed)
	return r
}

// relevant reports whether ev can change what decide answers, and whether
// it is the agent's socket being created.
func (p *Plugin) relevant(ev fsnotify.Event) (matters, kubeletCreated bool) {
	switch filepath.Base(ev.Name) {
	case kubeletSocketName:
		return ev.Has(fsnotify.Create), ev.Has(fsnotify.Create)
	case p.cfg.SocketName:
		return ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename), false
	}
	return false, false
}

// run owns the watcher and the retry timer, and shuts the plugin down when
// ctx ends.
func (p *Plugin) run(ctx context.Context, w *fsnotify.Watcher, done chan struct{}) {
	defer close(done)
	defer p.shutdown(w)
	var retry clock.Timer // armed while a failed reaction waits for its retry
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	failed := false
	for {
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C()
		}
		kubeletCreated := false
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			p.log.Error("watching plugin directory", "dir", p.cfg.Dir, "err", err)
			continue
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			matters, created := p.relevant(ev)
			if !matters {
				continue
			}
			kubeletCreated = created
		case <-retryC:
			retry = nil
		}
		registered, err := p.react(ctx, kubeletCreated, failed)
		failed = err != nil
		if failed && retry == nil {
			retry = p.cfg.Clock.NewTimer(p.cfg.RetryInterval)
		}
		// Recorded after the timer is armed, so that a test driving a fake
		// clock may step it as soon as it sees the failure.
		if registered && !errors.Is(err, context.Canceled) {
			p.recordRegistration(err)
		}
	}
}

// react observes the directory and acts on decide's answer. registered
// tells whether it tried to register, and err is the first failure.
func (p *Plugin) react(ctx context.Context, kubeletCreated, lastFailed bool) (registered bool, err error) {
	p.life.Lock()
	defer p.life.Unlock()
	_, statErr := os.Stat(p.kubeletSocket())
	r := decide(observation{
		kubeletCreated:  kubeletCreated,
		kubeletExists:   statErr == nil,
		socketIntact:    p.srv != nil && p.srv.ownsSocket(),
		lastReactFailed: lastFailed,
	})
	if r.restartServer {
		p.log.Info("plugin socket gone: serving again")
		p.stopServingLocked()
		if err := p.serveLocked(); err != nil {
			p.log.Error("serving again", "err", err)
			return false, err
		}
	}
	if !r.register {
		return false, nil
	}
	if err := p.registerLocked(ctx); err != nil {
		p.log.Error("registering again", "err", err, "retryIn", p.cfg.RetryInterval)
		return true, err
	}
	return true, nil
}

// shutdown stops serving and closes the watcher: the end of run.
func (p *Plugin) shutdown(w *fsnotify.Watcher) {
	p.life.Lock()
	defer p.life.Unlock()
	p.stopServingLocked()
	if err := w.Close(); err != nil {
		p.log.Error("closing watcher", "err", err)
	}
	p.cancel()     // the context is done already; this releases it
	p.cancel = nil // done stays, for a Stop racing with the end of ctx to wait on
	p.log.Info("stopped")
}
