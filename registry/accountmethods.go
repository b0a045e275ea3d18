package registry

// accountList is the Derived key of a tool's entry as the accounts whose list is
// filed under key see it.
type accountList struct{ key string }

// forAccount is t as account sees it: for a tool whose methods differ per account
// (Tool.AccountMethods), a record with only the methods the account's list names and
// nothing of the other accounts' lists; t itself for any other tool. Accounts that
// share a list share its entry, whose schemas are those t compiled.
func (t *ToolEntry) forAccount(account string) *ToolEntry {
	a := t.Tool.AccountMethods
	if a == nil {
		return t
	}
	key, ok := a.Accounts[account]
	if !ok {
		key = "" // no list: no method
	}
	return t.Derived(accountList{key}, func(tool *Tool) any {
		names := map[string]bool{}
		for _, n := range a.Lists[key] {
			names[n] = true
		}
		own := *tool
		own.AccountMethods = nil
		own.Methods = make([]Method, 0, len(names))
		for _, m := range tool.Methods {
			if names[m.Name] {
				own.Methods = append(own.Methods, m)
			}
		}
		e := &ToolEntry{Tool: &own, methods: make(map[string]*MethodEntry, len(own.Methods))}
		for i := range own.Methods {
			m := &own.Methods[i]
			e.methods[m.Name] = &MethodEntry{Tool: &own, Method: m, schema: t.methods[m.Name].schema}
		}
		return e
	}).(*ToolEntry)
}
