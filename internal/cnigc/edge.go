package cnigc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Script returns the iptables-restore input that removes what h holds in
// the nat table: the rules that jump to or name the ID first, then its
// chains, flushed and deleted. iptables-restore applies it as one
// transaction, so a rule that changed meanwhile fails it whole and nothing
// is half removed.
func Script(h *Held) string {
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, r := range h.Rules {
		b.WriteString("-D " + strings.TrimPrefix(r.Line, "-A ") + "\n")
	}
	for _, c := range h.Chains {
		b.WriteString("-F " + c + "\n")
	}
	for _, c := range h.Chains {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Tables reads and changes the nat table.
type Tables interface {
	SaveNAT(ctx context.Context) (string, error)
	Restore(ctx context.Context, script string) error
}

// IPTables runs iptables-save and iptables-restore, the same iptables (nft
// or legacy) the plugins' go-iptables runs.
type IPTables struct{}

// SaveNAT returns `iptables-save -t nat`.
func (IPTables) SaveNAT(ctx context.Context) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "iptables-save", "-t", "nat")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("iptables-save -t nat: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Restore feeds script to iptables-restore without flushing anything else,
// waiting for the xtables lock the plugins may hold.
func (IPTables) Restore(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "iptables-restore", "-w", "5", "--noflush")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Leases reads and releases host-local's leases of one network.
type Leases interface {
	List() ([]Lease, error)
	Release(ctx context.Context, l Lease) error
}

// LeaseDir is host-local's store of one network: <dataDir>/<network>, one
// file per leased address, and a "lock" file host-local flocks while it
// allocates or releases.
type LeaseDir string

// List returns the leases in the dir; a dir not created yet holds none. A
// lease file that cannot be read or names no ID is skipped and named in
// the error; the others are still returned.
func (d LeaseDir) List() ([]Lease, error) {
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host-local leases: %w", err)
	}
	var out []Lease
	var errs []error
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err != nil || !e.Type().IsRegular() {
			continue // "lock", "last_reserved_ip.0"
		}
		id, err := d.owner(e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Lease{IP: e.Name(), ID: id})
	}
	return out, errors.Join(errs...)
}

// owner returns the container ID in the lease file of ip: its first line
// (host-local 1.1 writes "<id>\r\n<ifname>", older ones the ID alone).
func (d LeaseDir) owner(ip string) (string, error) {
	path := filepath.Join(string(d), ip)
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("host-local lease: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	id := strings.TrimSpace(first)
	if id == "" {
		return "", fmt.Errorf("host-local lease %s: names no container ID", path)
	}
	return id, nil
}

// Release removes l's lease file under host-local's lock, only if it
// still names l's ID: the address may have been released and leased anew.
func (d LeaseDir) Release(ctx context.Context, l Lease) error {
	unlock, err := d.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	id, err := d.owner(l.IP)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && id != l.ID) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(string(d), l.IP)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release host-local lease: %w", err)
	}
	return nil
}

// lock takes host-local's flock on <dir>/lock, polling so that ctx bounds
// the wait.
func (d LeaseDir) lock(ctx context.Context) (func(), error) {
	path := filepath.Join(string(d), "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("host-local lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("host-local lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("host-local lock %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// RemoveNetNS removes a named network namespace: its bind mount and its
// file. One already gone is no error. Processes still in it keep it alive
// until they exit, and its interfaces (the pod's veth, and so its host
// end) go with it.
func RemoveNetNS(path string) error {
	if err := syscall.Unmount(path, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}
