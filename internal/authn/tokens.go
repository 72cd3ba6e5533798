package authn

import (
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Tokens are the bearer tokens of a token file, in the API server's
// --token-auth-file format: one "token,user,uid[,groups]" CSV line per
// caller, groups being a quoted comma-separated list.
type Tokens struct {
	users map[[sha256.Size]byte]User
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.users) }

// LoadTokens reads a token file. Every bad line is reported, by number.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	t, err := parseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return t, nil
}

func parseTokens(r io.Reader) (*Tokens, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	t := &Tokens{users: map[[sha256.Size]byte]User{}}
	var errs []error
	for {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err // a csv.ParseError names the line
		}
		line, _ := cr.FieldPos(0)
		if len(record) < 3 {
			errs = append(errs, fmt.Errorf("line %d: want token,user,uid[,groups], got %d fields", line, len(record)))
			continue
		}
		token, name := strings.TrimSpace(record[0]), strings.TrimSpace(record[1])
		switch {
		case token == "":
			errs = append(errs, fmt.Errorf("line %d: the token is empty", line))
			continue
		case name == "":
			errs = append(errs, fmt.Errorf("line %d: the user name is empty", line))
			continue
		}
		u := User{Name: name, UID: strings.TrimSpace(record[2]), Method: "token"}
		if len(record) > 3 {
			for _, g := range strings.Split(record[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		key := sha256.Sum256([]byte(token))
		if _, dup := t.users[key]; dup {
			errs = append(errs, fmt.Errorf("line %d: the token of %q is used on an earlier line", line, name))
			continue
		}
		t.users[key] = u
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(t.users) == 0 {
		return nil, errors.New("no tokens")
	}
	return t, nil
}
