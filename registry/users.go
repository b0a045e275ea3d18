package registry

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Users of an account are the people who sign in to its dashboard and to its links:
// made by the admin with a sign-in secret (of which only the sha256 is kept), or
// naming a subject of the deployment's identity provider. They live in the account's
// record: every edge's view holds it already, so a sign-in and every token's check
// need no read, and deleting a user is one compare-and-set of that record whose
// revision the revocation names.

// User is one user of an account.
type User struct {
	Name string `json:"name"`
	// ID is new each time a user is made, so that a user made again under the name
	// of a deleted one is not taken for it (a dashboard sign-in names both).
	ID string `json:"id"`
	// Subject is the identity provider's subject (the claim --oidc-user-claim names)
	// of a user who signs in there; empty for a user made with a secret.
	Subject string `json:"subject,omitempty"`
	// SecretHash is the sha256 of the user's sign-in secret; never shown.
	SecretHash string    `json:"secret_sha256,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// Kind is how the user signs in: "secret" or "subject".
func (u User) Kind() string {
	if u.Subject != "" {
		return "subject"
	}
	return "secret"
}

// RevokedUser names a user deleted, by "account.name"; the view's accounts bucket
// records it.
const RevokedUser = "user"

// UserSecretPrefix begins every user's sign-in secret, so that one pasted where an
// API key goes is told apart.
const UserSecretPrefix = "tgu_"

// DefaultMaxUsers bounds the users of one account unless the edge sets another
// (toolgate edge --max-users-per-account): they live in the account's record.
const DefaultMaxUsers = 100

// maxSubjectLen bounds an identity provider's subject.
const maxSubjectLen = 255

// CheckUserName refuses a user name that could name anything else: letters, digits,
// '-', '_' and '@', at most 64 (no '.', '*', '>', space or control character, which
// a record's key or a subject would read as structure).
func CheckUserName(name string) error {
	if name == "" || len(name) > 64 {
		return invalidf("user name: must be 1 to 64 characters")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '@') {
			return invalidf("user name %q: only letters, digits, '-', '_' and '@'", name)
		}
	}
	return nil
}

// checkSubject refuses a subject that is empty, too long, not UTF-8 or holds a
// control character.
func checkSubject(subject string) error {
	if len(subject) > maxSubjectLen || !utf8.ValidString(subject) {
		return invalidf("subject: must be UTF-8, at most %d bytes", maxSubjectLen)
	}
	for _, r := range subject {
		if r < 0x20 || r == 0x7f {
			return invalidf("subject: must hold no control character")
		}
	}
	return nil
}

// ErrTooManyUsers: the account has as many users as it may.
var ErrTooManyUsers = errors.New("too many users")

// AddUser makes a user of account, at most max of them. A user without a subject
// gets a sign-in secret, returned this once; its sha256 is all that is kept.
func (s *Store) AddUser(ctx context.Context, account, name, subject string, max int) (*User, string, error) {
	if err := CheckUserName(name); err != nil {
		return nil, "", err
	}
	if err := checkSubject(subject); err != nil {
		return nil, "", err
	}
	u := User{Name: name, ID: NewID("usr_"), Subject: subject, CreatedAt: now()}
	var secret string
	if subject == "" {
		secret = UserSecretPrefix + base62(randomBytes(32))
		u.SecretHash = Hash(secret)
	}
	_, err := s.UpdateAccount(ctx, account, func(a *Account) error {
		if i := slices.IndexFunc(a.Users, func(o User) bool { return o.Name == name }); i >= 0 {
			if a.Users[i].ID == u.ID { // an earlier attempt wrote it
				return nil
			}
			return fmt.Errorf("user %q: %w", name, ErrExists)
		}
		if subject != "" && slices.ContainsFunc(a.Users, func(o User) bool { return o.Subject == subject }) {
			return fmt.Errorf("subject %q: %w", subject, ErrExists)
		}
		if len(a.Users) >= max {
			return fmt.Errorf("%w: account %s has %d, at most %d", ErrTooManyUsers, account, len(a.Users), max)
		}
		a.Users = append(a.Users, u)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return &u, secret, nil
}

// DeleteUser removes a user of account and announces it (see Revocation): every
// edge refuses its sign-ins from the announcement on. Its grants are package
// oauth's to revoke.
func (s *Store) DeleteUser(ctx context.Context, account, name string) (*User, error) {
	var gone User
	var rev uint64
	err := s.lastingEvery(ctx, s.opts.RevokeAttempt, func(ctx context.Context, _ bool) error {
		_, err := updateJSONWith(ctx, s, s.accounts, account, func(a *Account) error {
			i := slices.IndexFunc(a.Users, func(o User) bool { return o.Name == name })
			if i < 0 {
				return fmt.Errorf("user %q: %w", name, ErrNotFound)
			}
			gone = a.Users[i]
			a.Users = slices.Delete(a.Users, i, i+1)
			return nil
		}, func(b []byte, last uint64, _ *Account) (err error) {
			rev, err = s.accounts.Update(ctx, account, b, last)
			return err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	s.revoked(ctx, RevokedUser, account+"."+name, s.accounts, rev)
	return &gone, nil
}

// Public is the account as the admin API shows it: its users without their
// secrets' hashes.
func (a Account) Public() Account {
	a.Users = slices.Clone(a.Users)
	for i := range a.Users {
		a.Users[i].SecretHash = ""
	}
	return a
}

// User finds a user of account that may sign in: the account exists and the user is
// in it, not deleted as far as this view heard.
func (s *Snapshot) User(account, name string) *User {
	a := s.accounts[account]
	if a == nil || s.revokedAccount(account, "") || s.Revoked(RevokedUser, account+"."+name) {
		return nil
	}
	i := slices.IndexFunc(a.Users, func(u User) bool { return u.Name == name })
	if i < 0 {
		return nil
	}
	return &a.Users[i]
}

// UserBySubject finds the user of account an identity provider's subject names.
func (s *Snapshot) UserBySubject(account, subject string) *User {
	a := s.accounts[account]
	if a == nil || subject == "" {
		return nil
	}
	for _, u := range a.Users {
		if u.Subject == subject {
			return s.User(account, u.Name)
		}
	}
	return nil
}

// HasSubjectUsers reports whether account lists users of the identity provider:
// then only they sign in there.
func (s *Snapshot) HasSubjectUsers(account string) bool {
	a := s.accounts[account]
	return a != nil && slices.ContainsFunc(a.Users, func(u User) bool { return u.Subject != "" })
}

// AuthenticateUser finds the user of account that name and secret sign in as. Every
// failure is ErrUnauthenticated; the secret's hash is compared in constant time.
func (s *Snapshot) AuthenticateUser(account, name, secret string) (Principal, *User, error) {
	u := s.User(account, name)
	if u == nil || u.SecretHash == "" || secret == "" {
		return Principal{}, nil, ErrUnauthenticated
	}
	if subtle.ConstantTimeCompare([]byte(Hash(secret)), []byte(u.SecretHash)) != 1 {
		return Principal{}, nil, ErrUnauthenticated
	}
	return Principal{Account: account, User: u.Name}, u, nil
}
