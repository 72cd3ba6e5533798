package expansion

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{
		"A":     "alpha",
		"B":     "beta",
		"EMPTY": "",
		"REF":   "$(A)", // values are not expanded twice
	}
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"plain", "plain"},
		{"$(A)", "alpha"},
		{"x$(A)y$(B)z", "xalphaybetaz"},
		{"$(A)$(B)", "alphabeta"},
		{"$(EMPTY)", ""},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"pre-$(UNDEFINED)-post", "pre-$(UNDEFINED)-post"},
		{"$(REF)", "$(A)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$alpha"},
		{"$$$$(A)", "$$(A)"},
		{"$$", "$"},
		{"a$$b", "a$b"},
		{"$", "$"},
		{"a$", "a$"},
		{"$a", "$a"},
		{"$A", "$A"},
		{"${A}", "${A}"},
		{"$(A", "$(A"},
		{"$(", "$("},
		{"$()", "$()"},
		{"$(A $(B)", "$(A $(B)"},
		{"$(A)$", "alpha$"},
		{"100$ and $(A)", "100$ and alpha"},
		{"$(A)$(", "alpha$("},
		{"ünïcødé $(B)", "ünïcødé beta"},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, MapLookup(vars)); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMapLookupPrecedence(t *testing.T) {
	lookup := MapLookup(map[string]string{"X": "first"}, map[string]string{"X": "second", "Y": "y"})
	if v, _ := lookup("X"); v != "first" {
		t.Errorf("X = %q, want first", v)
	}
	if v, _ := lookup("Y"); v != "y" {
		t.Errorf("Y = %q, want y", v)
	}
	if _, ok := lookup("Z"); ok {
		t.Error("Z found, want not found")
	}
}
