package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// AccountMethods says, of a tool whose methods differ per account, which of them
// each account may see and call: a bridged remote server that requires OAuth lists
// to each account's token the tools that account's grant opens, and the record's
// Methods are every method some account's list holds. Each distinct list of method
// names is filed once in Lists, under its ListKey; Accounts names each account's
// list. An account that has none sees and calls no method.
type AccountMethods struct {
	Lists    map[string][]string `json:"lists"`
	Accounts map[string]string   `json:"accounts"`
}

// ListKey is the key a list of method names is filed under in AccountMethods.Lists:
// the same for the same names in any order.
func ListKey(names []string) string {
	sorted := slices.Sorted(slices.Values(names))
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	return hex.EncodeToString(sum[:8])
}

// Of are the method names account may see and call; nil for none.
func (a *AccountMethods) Of(account string) []string {
	if a == nil {
		return nil
	}
	key, ok := a.Accounts[account]
	if !ok {
		return nil
	}
	return a.Lists[key]
}

// checkAccountMethods returns why a cannot be t's account methods, or nil: every
// account names a list that is filed, and every list names methods of t.
func checkAccountMethods(t *Tool) error {
	a := t.AccountMethods
	for account, key := range a.Accounts {
		if _, ok := a.Lists[key]; !ok {
			return fmt.Errorf("tool %s: account methods: account %s names list %q, which is not filed", t.ID, account, key)
		}
	}
	for key, names := range a.Lists {
		for _, name := range names {
			if t.Method(name) == nil {
				return fmt.Errorf("tool %s: account methods: list %q names %s, which is no method of the tool", t.ID, key, name)
			}
		}
	}
	return nil
}
