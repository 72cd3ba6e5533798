// Package expansion expands $(VAR) references the way Kubernetes does in
// command, args, env values, subPathExpr and exec probe commands.
package expansion

import "strings"

// Expand replaces every $(NAME) reference in s with lookup(NAME), with the
// semantics Kubernetes documents for command, args, env values and
// subPathExpr:
//   - $$ is an escaped $ and yields a single $ (so $$(NAME) yields "$(NAME)");
//   - a reference whose name lookup does not know is left as written;
//   - a $ followed by anything else, or a $( that is never closed, is copied
//     literally.
func Expand(s string, lookup func(name string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// MapLookup resolves references against the given maps, earliest first.
func MapLookup(maps ...map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v, true
			}
		}
		return "", false
	}
}
