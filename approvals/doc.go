// Package approvals holds the calls an account's rules (registry.ApprovalRule) keep
// waiting for a person's decision. Each such call has a record in the JetStream KV
// bucket tg-approvals, bound to everything that makes it that call: the account, the
// caller (its key, or its link), the tool, the method, the sha256 of its arguments in
// canonical form, the version of the rule that asked for it and when it expires. A
// person approves or denies the record through any edge (the admin API, the
// dashboard); the edge holding the call sees the decision on the bucket and, for an
// approval, claims the record (a compare-and-set on its revision, so the call runs
// once whichever edges watch it) before it sends the call. A record nobody decided
// by its expiry fails the call.
package approvals
