package wire

import (
	"fmt"
	"regexp"
)

var (
	toolIDPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	methodNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

// ValidToolID reports whether id may name a tool. Tool ids are subject tokens, so the
// pattern keeps out dots, wildcards and white space.
func ValidToolID(id string) bool { return toolIDPattern.MatchString(id) }

// ValidMethodName reports whether name may name a method.
func ValidMethodName(name string) bool { return methodNamePattern.MatchString(name) }

// CheckToolID returns an error naming the rule when id is not a valid tool id.
func CheckToolID(id string) error {
	if !ValidToolID(id) {
		return fmt.Errorf("tool id %q: must match %s", id, toolIDPattern)
	}
	return nil
}

// CheckMethodName returns an error naming the rule when name is not a valid method name.
func CheckMethodName(name string) error {
	if !ValidMethodName(name) {
		return fmt.Errorf("method name %q: must match %s", name, methodNamePattern)
	}
	return nil
}

// ValidToken reports whether s may stand in a subject as one token made by toolgate:
// a call id, a session id, a session request's id. Letters, digits, '-' and '_', at
// most 128 of them.
func ValidToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenByte(s[i]) {
			return false
		}
	}
	return true
}

// tokenByte reports whether c may be in a token (ValidToken).
func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
