// Package cnigc collects the CNI state of berth's pod network that no
// sandbox of the runtime owns any more: the bridge plugin's masquerade
// chain and its POSTROUTING rule, portmap's per-sandbox DNAT chain and its
// entry rule, and host-local's address lease.
//
// The CNI plugins berth runs (containernetworking-plugins 1.1.1) remember
// nothing: a CNI DEL with an empty or vanished netns (containerd 1.6 sends
// one when the sandbox's netns is gone) releases the lease but leaves the
// bridge plugin's masquerade chain, and a containerd killed between CNI ADD
// and persisting the sandbox forgets the sandbox and everything it set up.
// containerd 2 and CNI 1.1 have a GC verb for this; these plugins do not,
// so berth does it itself, for its own network on its own pod CIDR only.
package cnigc

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Rule is one rule of an `iptables-save -t nat` text.
type Rule struct {
	Chain string
	// Line is the rule as iptables-save printed it ("-A CHAIN ..."), which
	// iptables-restore reads back unchanged.
	Line string
	// Args are the rule's words after the chain, unquoted.
	Args []string
}

// Comment returns the rule's --comment, or "".
func (r Rule) Comment() string { return r.arg("--comment") }

// Jump returns the rule's -j target, or "".
func (r Rule) Jump() string { return r.arg("-j") }

func (r Rule) arg(flag string) string {
	for i := 0; i+1 < len(r.Args); i++ {
		if r.Args[i] == flag {
			return r.Args[i+1]
		}
	}
	return ""
}

// NAT is the nat table as iptables-save prints it.
type NAT struct {
	Chains map[string]bool // every chain declared, built-in ones included
	Rules  []Rule
}

// ParseNAT reads the nat table of an `iptables-save` text. Lines of other
// tables, counters and comments are skipped; a rule line that cannot be
// split (an unterminated quote), or that comes before any table, is an
// error naming the line.
func ParseNAT(save string) (NAT, error) {
	n := NAT{Chains: map[string]bool{}}
	table := ""
	for i, line := range strings.Split(save, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case table == "" && strings.HasPrefix(line, "-A "):
			return NAT{}, fmt.Errorf("iptables-save line %d %q: a rule outside a table", i+1, line)
		case table != "nat":
		case strings.HasPrefix(line, ":"):
			if f := strings.Fields(line[1:]); len(f) > 0 {
				n.Chains[f[0]] = true
			}
		case strings.HasPrefix(line, "-A "):
			words, err := splitWords(line)
			if err != nil {
				return NAT{}, fmt.Errorf("iptables-save line %d %q: %w", i+1, line, err)
			}
			if len(words) < 2 {
				return NAT{}, fmt.Errorf("iptables-save line %d %q: no chain", i+1, line)
			}
			n.Rules = append(n.Rules, Rule{Chain: words[1], Line: line, Args: words[2:]})
		}
	}
	return n, nil
}

// splitWords splits a rule line as iptables-restore does: words separated
// by blanks; a double-quoted word may hold blanks, and a backslash inside
// it escapes the next character (iptables-save writes a comment's quotes
// as \").
func splitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case quoted && c == '"':
			quoted = false
		case quoted:
			cur.WriteByte(c)
		case c == '"':
			quoted, inWord = true, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// commentRE matches the comments the plugins put on a sandbox's rules:
// the bridge plugin's `name: "<net>" id: "<id>"` (utils.FormatComment)
// and portmap's `dnat name: "<net>" id: "<id>"`.
var commentRE = regexp.MustCompile(`^(?:dnat )?name: "([^"]*)" id: "([^"]*)"$`)

// OwnerOf returns the network and container ID that a CNI plugin's rule
// comment names, and false for any other comment.
func OwnerOf(comment string) (network, id string, ok bool) {
	m := commentRE.FindStringSubmatch(comment)
	if m == nil || m[1] == "" || m[2] == "" {
		return "", "", false
	}
	return m[1], m[2], true
}

// The chain names the plugins derive from the network name and container
// ID (utils.FormatChainName and MustFormatChainNameWithPrefix): a prefix
// and the hex SHA-512 of name+id, cut to 28 characters. A chain of that
// name is the sandbox's beyond doubt, whatever its rules say.
const maxChainLength = 28

func chainName(prefix, network, id string) string {
	sum := sha512.Sum512([]byte(network + id))
	return (prefix + hex.EncodeToString(sum[:]))[:maxChainLength]
}

// MasqChain is the bridge plugin's masquerade chain of a sandbox.
func MasqChain(network, id string) string { return chainName("CNI-", network, id) }

// DNATChain is portmap's DNAT chain of a sandbox.
func DNATChain(network, id string) string { return chainName("CNI-DN-", network, id) }
