package busauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
)

// The accounts of a deployment.
const (
	SystemAccountName = "SYS"
	AccountName       = "toolgate"
)

// Roles of the users of the toolgate account.
const (
	RoleEdge   = "edge"
	RoleAdmin  = "admin"
	RoleWorker = "worker"
	// RoleSystem is the system account's user the credentials commands push account
	// JWTs to the servers with; it is not a user of the toolgate account.
	RoleSystem = "system"
)

// The layout of a deployment's directory. The server directory holds only public
// JWTs, so it can be given to the NATS nodes as it is; keys and creds hold secrets.
const (
	dirKeys        = "keys"
	dirCreds       = "creds"
	dirServer      = "server"
	operatorJWT    = "operator.jwt"
	accountsDir    = "accounts"
	natsServerConf = ServerConfFile
	authConf       = "auth.conf"
	grantsFile     = "issued.json"
	lockFile       = ".lock"
)

// ServerConfFile is the include file for the official nats-server in the server
// directory. Init writes it last, so a node waiting for a deployment's security can
// wait for it.
const ServerConfFile = "nats-server.conf"

// ErrNoGrant is Revoke finding nothing issued that matches.
var ErrNoGrant = errors.New("busauth: no credentials issued that match")

// Deployment is a deployment's bus security as kept in its directory (see Init).
type Deployment struct {
	dir      string
	subjects wire.Subjects
	operator nkeys.KeyPair
	system   nkeys.KeyPair // the system account's identity key
	account  nkeys.KeyPair // the toolgate account's identity key
}

// Grant is the record of one user issued: which role, for which tools, when, and
// whether it was revoked. It never holds the user's seed.
type Grant struct {
	User      string     `json:"user"` // the user's public key
	Role      string     `json:"role"`
	Tools     []string   `json:"tools,omitempty"`
	Name      string     `json:"name"`
	IssuedAt  time.Time  `json:"issued_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Init makes whatever is missing of a deployment's bus security in dir, keeping
// everything that exists, and returns the deployment and the files it made:
//
//	keys/      the seeds of the operator, the system account and the toolgate account (0600)
//	creds/     edge.creds, admin.creds and system.creds (0600)
//	server/    operator.jwt, accounts/SYS.jwt, accounts/toolgate.jwt: what a NATS node
//	           needs (toolgate nats --auth), all public; and nats-server.conf, the same
//	           for the official nats-server (include it from its configuration), with
//	           auth.conf, which it includes, for a server that has its own resolver block
//	issued.json every user issued: role, tools, public key, when; never a seed
//
// A file that does not match the keys (another operator's JWT) stops it, naming the
// file, rather than being replaced.
func Init(dir string) (*Deployment, []string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("busauth: %w", err)
	}
	unlock, err := lock(dir)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	var made []string
	d := &Deployment{dir: dir, subjects: wire.DefaultSubjects}
	keys := []struct {
		kp     *nkeys.KeyPair
		name   string
		create func() (nkeys.KeyPair, error)
	}{
		{&d.operator, "operator", nkeys.CreateOperator},
		{&d.system, SystemAccountName, nkeys.CreateAccount},
		{&d.account, AccountName, nkeys.CreateAccount},
	}
	for _, k := range keys {
		rel := filepath.Join(dirKeys, k.name+".nk")
		kp, created, err := loadOrCreateKey(filepath.Join(dir, rel), k.create)
		if err != nil {
			return nil, nil, err
		}
		*k.kp = kp
		if created {
			made = append(made, rel)
		}
	}
	for _, f := range []struct {
		rel  string
		make func() (string, error)
	}{
		{filepath.Join(dirServer, operatorJWT), d.operatorJWT},
		{d.accountFile(SystemAccountName), func() (string, error) { return d.newAccountJWT(d.system, SystemAccountName) }},
		{d.accountFile(AccountName), func() (string, error) { return d.newAccountJWT(d.account, AccountName) }},
	} {
		created, err := d.keepOrWrite(f.rel, f.make)
		if err != nil {
			return nil, nil, err
		}
		if created {
			made = append(made, f.rel)
		}
	}
	if err := d.checkSigned(); err != nil {
		return nil, nil, err
	}
	for _, role := range []string{RoleSystem, RoleEdge, RoleAdmin} {
		rel := filepath.Join(dirCreds, role+".creds")
		if _, err := os.Stat(filepath.Join(dir, rel)); err == nil {
			continue
		}
		creds, g, err := d.issue(role, nil, role, 0)
		if err != nil {
			return nil, nil, err
		}
		if err := writeFile(filepath.Join(dir, rel), creds, 0o600); err != nil {
			return nil, nil, fmt.Errorf("busauth: %w", err)
		}
		if role != RoleSystem {
			if err := d.record(g); err != nil {
				return nil, nil, err
			}
		}
		made = append(made, rel)
	}
	if changed, err := d.writeServerConf(); err != nil {
		return nil, nil, err
	} else if changed {
		made = append(made, filepath.Join(dirServer, authConf), filepath.Join(dirServer, natsServerConf))
	}
	return d, made, nil
}

// Open reads the deployment Init made in dir.
func Open(dir string) (*Deployment, error) {
	d := &Deployment{dir: dir, subjects: wire.DefaultSubjects}
	for _, k := range []struct {
		kp   *nkeys.KeyPair
		name string
	}{{&d.operator, "operator"}, {&d.system, SystemAccountName}, {&d.account, AccountName}} {
		seed, err := os.ReadFile(filepath.Join(dir, dirKeys, k.name+".nk"))
		if err != nil {
			return nil, fmt.Errorf("busauth: %w (make the deployment's security with `toolgate creds init`)", err)
		}
		if *k.kp, err = nkeys.FromSeed([]byte(strings.TrimSpace(string(seed)))); err != nil {
			return nil, fmt.Errorf("busauth: %s: %w", filepath.Join(dir, dirKeys, k.name+".nk"), err)
		}
	}
	if err := d.checkSigned(); err != nil {
		return nil, err
	}
	return d, nil
}

// Dir is the deployment's directory.
func (d *Deployment) Dir() string { return d.dir }

// CredsFile is where Init keeps a role's credentials file (edge, admin, system).
func (d *Deployment) CredsFile(role string) string {
	return filepath.Join(d.dir, dirCreds, role+".creds")
}

// ServerDir is the directory of what a NATS node needs (toolgate nats --auth).
func (d *Deployment) ServerDir() string { return filepath.Join(d.dir, dirServer) }

// IssueWorker makes the credentials of a new user that may serve the given tools and
// nothing else (WorkerPermissions), records it, and returns the credentials file's
// content. expires, when not zero, is how long they are valid.
func (d *Deployment) IssueWorker(tools []string, name string, expires time.Duration) ([]byte, Grant, error) {
	if len(tools) == 0 {
		return nil, Grant{}, errors.New("busauth: issue: at least one tool")
	}
	for _, t := range tools {
		if !wire.ValidToolID(t) {
			return nil, Grant{}, fmt.Errorf("busauth: issue: tool %q: must match ^[a-z0-9][a-z0-9-]{0,62}$", t)
		}
	}
	if name == "" {
		name = "worker-" + strings.Join(tools, "-")
	}
	unlock, err := lock(d.dir)
	if err != nil {
		return nil, Grant{}, err
	}
	defer unlock()
	creds, g, err := d.issue(RoleWorker, tools, name, expires)
	if err != nil {
		return nil, Grant{}, err
	}
	if creds, err = d.withSealKeys(creds, tools); err != nil {
		return nil, Grant{}, err
	}
	if err := d.record(g); err != nil {
		return nil, Grant{}, err
	}
	return creds, g, nil
}

// issue signs a new user of the role's account with the role's permissions.
func (d *Deployment) issue(role string, tools []string, name string, expires time.Duration) ([]byte, Grant, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, Grant{}, fmt.Errorf("busauth: user key: %w", err)
	}
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	signer := d.account
	switch role {
	case RoleWorker:
		uc.Permissions = WorkerPermissions(d.subjects, tools...)
	case RoleEdge:
		uc.Permissions = EdgePermissions(d.subjects)
	case RoleAdmin:
		uc.Permissions = AdminPermissions()
	case RoleSystem:
		uc.Permissions = SystemPermissions()
		signer = d.system
	default:
		return nil, Grant{}, fmt.Errorf("busauth: no role %q", role)
	}
	now := time.Now().UTC().Truncate(time.Second)
	g := Grant{User: pub, Role: role, Tools: tools, Name: name, IssuedAt: now}
	if expires > 0 {
		at := now.Add(expires)
		uc.Expires = at.Unix()
		g.ExpiresAt = &at
	}
	token, err := uc.Encode(signer)
	if err != nil {
		return nil, Grant{}, fmt.Errorf("busauth: sign user %s: %w", name, err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return nil, Grant{}, fmt.Errorf("busauth: credentials of %s: %w", name, err)
	}
	return creds, g, nil
}

// Grants lists every user issued, oldest first.
func (d *Deployment) Grants() ([]Grant, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, grantsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("busauth: %w", err)
	}
	var gs []Grant
	if err := json.Unmarshal(b, &gs); err != nil {
		return nil, fmt.Errorf("busauth: %s: %w", filepath.Join(d.dir, grantsFile), err)
	}
	return gs, nil
}

func (d *Deployment) record(g Grant) error {
	gs, err := d.Grants()
	if err != nil {
		return err
	}
	return d.saveGrants(append(gs, g))
}

func (d *Deployment) saveGrants(gs []Grant) error {
	b, err := json.MarshalIndent(gs, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(d.dir, grantsFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("busauth: %w", err)
	}
	return nil
}

// Revoke revokes, in the toolgate account's JWT, the user whose public key is user,
// or with user empty every user issued for tool, and returns the grants revoked and
// the account's new JWT, which takes effect when the servers have it (Push). Users
// revoked before stay revoked at their first time; revoking them again only gives
// the servers the JWT again.
func (d *Deployment) Revoke(tool, user string) ([]Grant, string, error) {
	unlock, err := lock(d.dir)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	gs, err := d.Grants()
	if err != nil {
		return nil, "", err
	}
	ac, err := d.accountClaims(AccountName)
	if err != nil {
		return nil, "", err
	}
	now := time.Now().UTC().Truncate(time.Second)
	var revoked []Grant
	for i, g := range gs {
		if (user != "" && g.User != user) || (tool != "" && !slices.Contains(g.Tools, tool)) {
			continue
		}
		if g.RevokedAt == nil {
			gs[i].RevokedAt = &now
			// Every JWT of this user issued at or before now is refused; a user is
			// only ever issued once, so that is all of them.
			ac.RevokeAt(g.User, now)
		}
		revoked = append(revoked, gs[i])
	}
	if len(revoked) == 0 {
		return nil, "", fmt.Errorf("%w: tool %q, user %q", ErrNoGrant, tool, user)
	}
	token, err := ac.Encode(d.operator)
	if err != nil {
		return nil, "", fmt.Errorf("busauth: sign account %s: %w", AccountName, err)
	}
	if err := writeFile(filepath.Join(d.dir, d.accountFile(AccountName)), []byte(token+"\n"), 0o644); err != nil {
		return nil, "", fmt.Errorf("busauth: %w", err)
	}
	if _, err := d.writeServerConf(); err != nil {
		return nil, "", err
	}
	if err := d.saveGrants(gs); err != nil {
		return nil, "", err
	}
	return revoked, token, nil
}

// AccountJWT is the toolgate account's JWT as the deployment has it now.
func (d *Deployment) AccountJWT() (string, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, d.accountFile(AccountName)))
	if err != nil {
		return "", fmt.Errorf("busauth: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (d *Deployment) accountFile(name string) string {
	return filepath.Join(dirServer, accountsDir, name+".jwt")
}

func (d *Deployment) accountClaims(name string) (*jwt.AccountClaims, error) {
	path := filepath.Join(d.dir, d.accountFile(name))
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("busauth: %w", err)
	}
	ac, err := jwt.DecodeAccountClaims(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("busauth: %s: %w", path, err)
	}
	return ac, nil
}

func (d *Deployment) operatorJWT() (string, error) {
	pub, _ := d.operator.PublicKey()
	sys, _ := d.system.PublicKey()
	oc := jwt.NewOperatorClaims(pub)
	oc.Name = AccountName
	oc.SystemAccount = sys
	return oc.Encode(d.operator)
}

// newAccountJWT signs an account: the toolgate account with JetStream and no limits,
// the system account as it must be, without JetStream.
func (d *Deployment) newAccountJWT(kp nkeys.KeyPair, name string) (string, error) {
	pub, _ := kp.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	if name == AccountName {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
			MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit,
		}
	}
	return ac.Encode(d.operator)
}

// checkSigned makes sure the JWTs in the directory are the keys' own: an operator
// JWT of the operator key naming the system account, and accounts of the account
// keys that the operator signed.
func (d *Deployment) checkSigned() error {
	opPub, _ := d.operator.PublicKey()
	path := filepath.Join(d.dir, dirServer, operatorJWT)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("busauth: %w", err)
	}
	oc, err := jwt.DecodeOperatorClaims(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("busauth: %s: %w", path, err)
	}
	sysPub, _ := d.system.PublicKey()
	if oc.Subject != opPub || oc.SystemAccount != sysPub {
		return fmt.Errorf("busauth: %s: not this deployment's operator (keys/operator.nk) or system account; move the directory aside to start over", path)
	}
	for _, a := range []struct {
		name string
		kp   nkeys.KeyPair
	}{{SystemAccountName, d.system}, {AccountName, d.account}} {
		ac, err := d.accountClaims(a.name)
		if err != nil {
			return err
		}
		pub, _ := a.kp.PublicKey()
		if ac.Subject != pub || ac.Issuer != opPub {
			return fmt.Errorf("busauth: %s: not account %s signed by this deployment's operator", filepath.Join(d.dir, d.accountFile(a.name)), a.name)
		}
	}
	return nil
}

// keepOrWrite writes the file rel with what make returns unless it exists.
func (d *Deployment) keepOrWrite(rel string, make func() (string, error)) (bool, error) {
	path := filepath.Join(d.dir, rel)
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	s, err := make()
	if err != nil {
		return false, fmt.Errorf("busauth: %s: %w", rel, err)
	}
	if err := writeFile(path, []byte(s+"\n"), 0o644); err != nil {
		return false, fmt.Errorf("busauth: %w", err)
	}
	return true, nil
}

// writeServerConf writes the settings the official nats-server needs for this
// deployment, as include files, and reports whether any changed: auth.conf holds
// the operator, the system account and the accounts' JWTs to start with (what a
// NATS Helm chart that makes its own resolver block includes), nats-server.conf that
// and the NATS-based resolver, for a server configured by hand. nats-server.conf is
// written last (ServerConfFile).
func (d *Deployment) writeServerConf() (bool, error) {
	sys, _ := d.system.PublicKey()
	op, err := os.ReadFile(filepath.Join(d.dir, dirServer, operatorJWT))
	if err != nil {
		return false, fmt.Errorf("busauth: %w", err)
	}
	var auth strings.Builder
	fmt.Fprintf(&auth, "# The operator and accounts of a toolgate deployment, made by `toolgate creds init`.\n")
	fmt.Fprintf(&auth, "operator: %s\n", strings.TrimSpace(string(op)))
	fmt.Fprintf(&auth, "system_account: %s\n", sys)
	fmt.Fprintf(&auth, "# users' JWTs travel in their CONNECT lines; the edge's is longer than the default 4 KiB\n")
	fmt.Fprintf(&auth, "max_control_line: %d\n", bus.MaxControlLine)
	fmt.Fprintf(&auth, "resolver_preload: {\n")
	for _, n := range []string{SystemAccountName, AccountName} {
		ac, err := d.accountClaims(n)
		if err != nil {
			return false, err
		}
		token, err := os.ReadFile(filepath.Join(d.dir, d.accountFile(n)))
		if err != nil {
			return false, fmt.Errorf("busauth: %w", err)
		}
		fmt.Fprintf(&auth, "  # %s\n  %s: %s\n", n, ac.Subject, strings.TrimSpace(string(token)))
	}
	fmt.Fprintf(&auth, "}\n")

	var conf strings.Builder
	fmt.Fprintf(&conf, "# The bus security of a toolgate deployment, made by `toolgate creds init`:\n")
	fmt.Fprintf(&conf, "# include it from a nats-server configuration. Every node keeps account JWTs in\n")
	fmt.Fprintf(&conf, "# its own resolver directory and takes updates (revocations) at run time.\n")
	fmt.Fprintf(&conf, "include ./%s\n", authConf)
	fmt.Fprintf(&conf, "resolver: {\n  type: full\n  dir: \"./jwt\"\n  allow_delete: false\n  interval: \"30s\"\n}\n")

	changed := false
	for _, f := range []struct{ name, body string }{{authConf, auth.String()}, {natsServerConf, conf.String()}} {
		path := filepath.Join(d.dir, dirServer, f.name)
		if old, err := os.ReadFile(path); err == nil && string(old) == f.body {
			continue
		}
		if err := writeFile(path, []byte(f.body), 0o644); err != nil {
			return false, fmt.Errorf("busauth: %w", err)
		}
		changed = true
	}
	return changed, nil
}

// ServerAuth reads what a NATS node needs from a deployment's server directory (or
// from the deployment's own directory): the operator's JWT and the accounts' JWTs.
func ServerAuth(dir string) (*bus.ServerAuth, error) {
	if _, err := os.Stat(filepath.Join(dir, operatorJWT)); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, dirServer, operatorJWT)); err == nil {
			dir = filepath.Join(dir, dirServer)
		}
	}
	op, err := os.ReadFile(filepath.Join(dir, operatorJWT))
	if err != nil {
		return nil, fmt.Errorf("busauth: %w", err)
	}
	a := &bus.ServerAuth{Operator: strings.TrimSpace(string(op))}
	files, err := filepath.Glob(filepath.Join(dir, accountsDir, "*.jwt"))
	if err != nil {
		return nil, fmt.Errorf("busauth: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("busauth: %s: no account JWTs", filepath.Join(dir, accountsDir))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("busauth: %w", err)
		}
		a.Accounts = append(a.Accounts, strings.TrimSpace(string(b)))
	}
	return a, nil
}

// loadOrCreateKey reads the seed at path, or makes a key with create and keeps its
// seed there (0600).
func loadOrCreateKey(path string, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, bool, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
		if err != nil {
			return nil, false, fmt.Errorf("busauth: %s: %w", path, err)
		}
		return kp, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("busauth: %w", err)
	}
	kp, err := create()
	if err != nil {
		return nil, false, fmt.Errorf("busauth: %s: %w", path, err)
	}
	seed, _ := kp.Seed()
	if err := writeFile(path, append(seed, '\n'), 0o600); err != nil {
		return nil, false, fmt.Errorf("busauth: %w", err)
	}
	return kp, true, nil
}

// writeFile replaces path with b in one step (a temporary file renamed), so a reader
// never sees half a file, with mode perm whatever the umask.
func writeFile(path string, b []byte, perm os.FileMode) error {
	dirPerm := os.FileMode(0o700)
	if perm&0o044 != 0 {
		dirPerm = 0o755
	}
	if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// lock keeps other credentials commands off the directory until unlock: two
// revocations at once must not lose one. The lock is a file made exclusively; a
// command that died holding it leaves it behind, and the error says so.
func lock(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, lockFile)
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%d\n", os.Getpid())
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("busauth: lock: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("busauth: %s: another credentials command has held it for 10s; remove it if none is running", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// withSealKeys appends to a worker's credentials the seal key of each of its tools
// (wire.SealKeyBlock), to which edges seal the accounts' connection values for the
// tool's calls. Each is derived from the account's seed, so that every credentials
// file issued for a tool carries the same key, and none issued for another tool does.
func (d *Deployment) withSealKeys(creds []byte, tools []string) ([]byte, error) {
	seed, err := d.account.Seed()
	if err != nil {
		return nil, fmt.Errorf("busauth: seal keys: %w", err)
	}
	for _, tool := range tools {
		kp, err := wire.DeriveSealKey(seed, tool)
		if err != nil {
			return nil, fmt.Errorf("busauth: seal key of %s: %w", tool, err)
		}
		block, err := wire.SealKeyBlock(kp, tool)
		if err != nil {
			return nil, err
		}
		creds = append(creds, block...)
	}
	return creds, nil
}
