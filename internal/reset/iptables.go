package reset

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Rule is one iptables rule as iptables-save prints it: its table, chain
// and the arguments after "-A <chain>".
type Rule struct {
	Table, Chain string
	Args         []string
}

// Target is the chain or verdict the rule jumps to ("" if none).
func (r Rule) Target() string {
	for i, a := range r.Args {
		if (a == "-j" || a == "--jump" || a == "-g" || a == "--goto") && i+1 < len(r.Args) {
			return r.Args[i+1]
		}
	}
	return ""
}

// comment is the rule's --comment, unquoted ("" if none).
func (r Rule) comment() string {
	for i, a := range r.Args {
		if a == "--comment" && i+1 < len(r.Args) {
			return r.Args[i+1]
		}
	}
	return ""
}

// ParseSave reads iptables-save output into its rules.
func ParseSave(text string) ([]Rule, error) {
	var rules []Rule
	table := ""
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, "-A "):
			args, err := splitArgs(line)
			if err != nil {
				return nil, fmt.Errorf("iptables-save line %d: %w", n+1, err)
			}
			if table == "" || len(args) < 2 {
				return nil, fmt.Errorf("iptables-save line %d: a rule outside a table or without a chain", n+1)
			}
			rules = append(rules, Rule{Table: table, Chain: args[1], Args: args[2:]})
		}
	}
	return rules, nil
}

// splitArgs splits an iptables-save line as its shell quoting says:
// double quotes, with \" and \\ inside.
func splitArgs(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\'):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			inQuote, have = !inQuote, true
		case !inQuote && (c == ' ' || c == '\t'):
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if inQuote {
		return nil, errors.New("unterminated quote")
	}
	if have {
		args = append(args, cur.String())
	}
	return args, nil
}

// sharedChains are the portmap plugin's chains that every CNI network on
// the host shares: berth's rules in them go, the chains stay.
var sharedChains = []string{"CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-SETMARK", "CNI-HOSTPORT-MASQ", "CNI-FORWARD", "CNI-ADMIN"}

// SelectRules picks the rules of CNI network `network` that name one of
// berth's sandboxes in their comment (the bridge and portmap plugins write
// `name: "<network>" id: "<sandbox>"`), and the per-sandbox chains those
// rules jump to, which the plugins create for that sandbox alone and which
// go whole. Another berth on the host uses the same network name, so the
// sandbox id is what makes a rule this berth's.
func SelectRules(rules []Rule, network string, sandboxIDs []string) (deletions []Rule, chains []Rule) {
	ids := map[string]bool{}
	for _, id := range sandboxIDs {
		if id != "" {
			ids[id] = true
		}
	}
	owned := map[[2]string]bool{} // {table, chain}
	for _, r := range rules {
		if !namesSandbox(r.comment(), network, ids) {
			continue
		}
		deletions = append(deletions, r)
		if t := r.Target(); strings.HasPrefix(t, "CNI-") && !slices.Contains(sharedChains, t) {
			owned[[2]string{r.Table, t}] = true
		}
	}
	// A rule inside an owned chain goes with the chain.
	deletions = slices.DeleteFunc(deletions, func(r Rule) bool { return owned[[2]string{r.Table, r.Chain}] })
	for k := range owned {
		chains = append(chains, Rule{Table: k[0], Chain: k[1]})
	}
	slices.SortFunc(chains, func(a, b Rule) int { return strings.Compare(a.Table+" "+a.Chain, b.Table+" "+b.Chain) })
	return deletions, chains
}

func namesSandbox(comment, network string, ids map[string]bool) bool {
	_, rest, ok := strings.Cut(comment, `name: "`+network+`" id: "`)
	if !ok {
		return false
	}
	id, _, ok := strings.Cut(rest, `"`)
	return ok && ids[id]
}
