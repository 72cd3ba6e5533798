package conformance

import (
	"bytes"
	"fmt"
)

// hideApplet returns a copy of a busybox binary in which the applet name
// is renamed alias in busybox's table of applet names, so that busybox no
// longer knows an applet of that name. Debian's static busybox is built
// with FEATURE_SH_STANDALONE: its sh runs its own applet of a command's
// name before looking in PATH, so a stand-in for a program busybox has (its
// nc lacks the -u, -v and -t the suite uses) is only run once the applet is
// gone. The table is sorted and binary-searched, so alias must be as long
// as name and sort between the same neighbours; name must appear in the
// binary exactly once.
func hideApplet(bin []byte, name, alias string) ([]byte, error) {
	if len(alias) != len(name) || alias == name {
		return nil, fmt.Errorf("hide applet %s: alias %q must differ and be as long", name, alias)
	}
	entry := []byte("\x00" + name + "\x00")
	if n := bytes.Count(bin, entry); n != 1 {
		return nil, fmt.Errorf("hide applet %s: found %d times in the binary, want once", name, n)
	}
	i := bytes.Index(bin, entry)
	prevStart := bytes.LastIndexByte(bin[:i], 0) + 1
	prev := string(bin[prevStart:i])
	rest := bin[i+len(entry):]
	next := string(rest[:max(bytes.IndexByte(rest, 0), 0)])
	if !(prev < alias && alias < next) {
		return nil, fmt.Errorf("hide applet %s: alias %q does not sort between its neighbours %q and %q", name, alias, prev, next)
	}
	if bytes.Contains(bin, []byte("\x00"+alias+"\x00")) {
		return nil, fmt.Errorf("hide applet %s: alias %q is taken", name, alias)
	}
	out := bytes.Clone(bin)
	copy(out[i+1:], alias)
	return out, nil
}
