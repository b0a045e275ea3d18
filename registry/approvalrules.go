package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
)

// MaxApprovalRules is the most approval rules an account may have.
const MaxApprovalRules = 64

// AnyMethod is an approval rule's method that matches every method of its tool.
const AnyMethod = "*"

// ApprovalRule says that a call of the account's to Tool's Method (AnyMethod: any
// of its methods) runs only once a person approved that very call. ExpiresIn is how
// long, in seconds, the call waits for a decision (0: the edge's default); the edge's
// maximum bounds it.
type ApprovalRule struct {
	Tool      string `json:"tool"`
	Method    string `json:"method"`
	ExpiresIn int    `json:"expires_in,omitempty"`
}

// Version names the rule as it is, expiry included: an approval records the version
// of the rule that asked for it, so a changed rule is told apart from the one a
// person approved under.
func (r ApprovalRule) Version() string {
	sum := sha256.Sum256([]byte(r.Tool + "\x00" + r.Method + "\x00" + strconv.Itoa(r.ExpiresIn)))
	return hex.EncodeToString(sum[:8])
}

// Expiry is how long a call under r waits for a decision: its own ExpiresIn, else
// def, at most max.
func (r ApprovalRule) Expiry(def, max time.Duration) time.Duration {
	d := def
	if r.ExpiresIn > 0 {
		d = time.Duration(r.ExpiresIn) * time.Second
	}
	return min(d, max)
}

// ApprovalRuleFor is the rule of l that asks for approval of a call of tool and
// method: one naming the method before one for any method of the tool.
func (l Limits) ApprovalRuleFor(tool, method string) (ApprovalRule, bool) {
	var any *ApprovalRule
	for i, r := range l.Approvals {
		switch {
		case r.Tool != tool:
		case r.Method == method:
			return r, true
		case r.Method == AnyMethod && any == nil:
			any = &l.Approvals[i]
		}
	}
	if any != nil {
		return *any, true
	}
	return ApprovalRule{}, false
}

// ApprovalRulesViolations is what is wrong with rules, each under pointer and its
// index; max bounds ExpiresIn (0: no bound).
func ApprovalRulesViolations(pointer string, rules []ApprovalRule, max time.Duration) []Violation {
	if len(rules) > MaxApprovalRules {
		return []Violation{{Pointer: pointer, Message: fmt.Sprintf("at most %d rules", MaxApprovalRules)}}
	}
	var vs []Violation
	seen := map[string]int{}
	for i, r := range rules {
		at := pointer + "/" + strconv.Itoa(i)
		if !wire.ValidToolID(r.Tool) {
			vs = append(vs, Violation{Pointer: at + "/tool", Message: "must be a tool id"})
		}
		if r.Method != AnyMethod && !wire.ValidMethodName(r.Method) {
			vs = append(vs, Violation{Pointer: at + "/method", Message: `must be a method name, or "*" for every method`})
		}
		switch {
		case r.ExpiresIn < 0:
			vs = append(vs, Violation{Pointer: at + "/expires_in", Message: "must not be negative"})
		case max > 0 && time.Duration(r.ExpiresIn)*time.Second > max:
			vs = append(vs, Violation{Pointer: at + "/expires_in", Message: fmt.Sprintf("must be at most %d seconds, the deployment's maximum", int(max/time.Second))})
		}
		key := r.Tool + "\x00" + r.Method
		if j, ok := seen[key]; ok {
			vs = append(vs, Violation{Pointer: at, Message: fmt.Sprintf("names what rule %d names (same tool and method): make it one rule", j)})
		}
		seen[key] = i
	}
	return vs
}
