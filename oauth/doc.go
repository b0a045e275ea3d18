// Package oauth makes every link and every /tools/{tool}/mcp endpoint an OAuth 2.1
// protected resource (RFC 9728) whose tokens this deployment issues itself: the
// signing keys, kept in the registry so any edge issues and checks tokens (keys.go);
// the access tokens, JWTs signed with them and checked for issuer, audience (the
// resource, RFC 8707), expiry and scope (token.go); and the scopes and documents a
// resource is described by (resource.go). Or whose tokens the deployment's own
// OpenID provider issues (external.go, with its key set in externalkeys.go).
package oauth
